// Package clocks samples the device's NVML facts (SM clock, power, clock
// reasons) while a measurement runs, for the examples that report
// throughput: the chip's clock moves with its load, and a throughput figure
// means little without the clock it ran at.
package clocks

import (
	"slices"
	"strings"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Every is how often a measurement samples the NVML facts.
const Every = 100 * time.Millisecond

// Clocks is what NVML said while one measurement ran: means over its samples.
type Clocks struct {
	Samples     int     `json:"nvml_samples"`
	SMClockMHz  float64 `json:"sm_clock_mhz,omitempty"` // mean over samples that had it
	PowerW      float64 `json:"power_w,omitempty"`      // mean
	PowerLimitW float64 `json:"power_limit_w,omitempty"`
	// Reasons is every clock reason seen in any sample.
	Reasons    string `json:"clock_reasons"`
	ReasonBits uint64 `json:"clock_reason_bits"`
	// Note says why figures are missing (NVML unavailable, facts refused).
	Note string `json:"nvml_note,omitempty"`
}

// Sample calls read every `every` on a goroutine of its own until the
// returned stop is called; stop waits for that goroutine and summarises the
// samples (taking one itself if the run was shorter than a period).
func Sample(read func() fcsp.NVMLFacts, every time.Duration) (stop func() Clocks) {
	done := make(chan struct{})
	got := make(chan []fcsp.NVMLFacts, 1)
	go func() {
		var s []fcsp.NVMLFacts
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				got <- s
				return
			case <-tick.C:
				s = append(s, read())
			}
		}
	}()
	return func() Clocks {
		close(done)
		s := <-got
		if len(s) == 0 {
			s = append(s, read())
		}
		return Summarize(s)
	}
}

// Summarize averages each figure over the samples that have it, so
// that one refused or unavailable sample does not drag a mean to zero.
func Summarize(s []fcsp.NVMLFacts) Clocks {
	c := Clocks{Samples: len(s)}
	var mhz, w float64
	var nMHz, nW, nAvail int
	var reasons fcsp.ClockReasons
	var notes []string
	note := func(n string) {
		if !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	for _, f := range s {
		if !f.Available {
			note(f.Reason)
			continue
		}
		nAvail++
		for _, r := range f.Refused {
			note(r)
		}
		if f.SMClockMHz > 0 {
			mhz += float64(f.SMClockMHz)
			nMHz++
		}
		if f.PowerW > 0 {
			w += f.PowerW
			nW++
		}
		if f.PowerLimitW > 0 {
			c.PowerLimitW = f.PowerLimitW
		}
		reasons |= f.ClockReasons
	}
	if nMHz > 0 {
		c.SMClockMHz = mhz / float64(nMHz)
	}
	if nW > 0 {
		c.PowerW = w / float64(nW)
	}
	c.Reasons, c.ReasonBits = reasons.String(), uint64(reasons)
	if nAvail == 0 {
		c.Reasons = "unknown"
	}
	c.Note = strings.Join(notes, "; ")
	return c
}
