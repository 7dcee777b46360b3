package clocks

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Means are over the samples that have the figure; reasons are the union;
// refusals and an unavailable NVML become one note each.
func TestSummarizeClocks(t *testing.T) {
	s := []fcsp.NVMLFacts{
		{Available: true, SMClockMHz: 1500, PowerW: 690, PowerLimitW: 700, ClockReasons: fcsp.ClockPowerCap},
		{Available: true, SMClockMHz: 1700, PowerLimitW: 700, ClockReasons: fcsp.ClockPowerCap | fcsp.ClockHWSlowdown,
			Refused: []string{"power draw: ERROR_UNKNOWN"}},
		{Reason: "nvml init: ERROR_TIMEOUT"},
		{Available: true, SMClockMHz: 1900, PowerW: 650, PowerLimitW: 700, Refused: []string{"power draw: ERROR_UNKNOWN"}},
	}
	got := Summarize(s)
	want := Clocks{Samples: 4, SMClockMHz: 1700, PowerW: 670, PowerLimitW: 700, Reasons: "power cap, hw slowdown",
		ReasonBits: uint64(fcsp.ClockPowerCap | fcsp.ClockHWSlowdown), Note: "power draw: ERROR_UNKNOWN; nvml init: ERROR_TIMEOUT"}
	if got != want {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got := Summarize([]fcsp.NVMLFacts{{Reason: "simulated device"}}); got.SMClockMHz != 0 || got.Reasons != "unknown" || got.Note != "simulated device" {
		t.Fatalf("unavailable: %+v", got)
	}
}

// The sampler reads on its own goroutine until stopped, and a row shorter
// than one period still gets one sample.
func TestSampleNVML(t *testing.T) {
	var n atomic.Int32
	third := make(chan struct{})
	read := func() fcsp.NVMLFacts {
		if n.Add(1) == 3 {
			close(third)
		}
		return fcsp.NVMLFacts{Available: true, SMClockMHz: uint32(1000 + 100*n.Load())}
	}
	stop := Sample(read, time.Millisecond)
	<-third
	c := stop()
	if c.Samples < 3 || int32(c.Samples) != n.Load() {
		t.Fatalf("%d samples, %d reads", c.Samples, n.Load())
	}
	if c.SMClockMHz <= 1000 {
		t.Fatalf("mean clock %v", c.SMClockMHz)
	}
	n.Store(100)
	if c := Sample(read, time.Hour)(); c.Samples != 1 || c.SMClockMHz != 1000+100*101 {
		t.Fatalf("short row: %+v", c)
	}
}
