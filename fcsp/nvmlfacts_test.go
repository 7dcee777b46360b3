package fcsp

import (
	"reflect"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/nvml"
)

func TestClockReasonsString(t *testing.T) {
	for _, c := range []struct {
		r    ClockReasons
		want string
	}{
		{0, "none"},
		{ClockPowerCap, "power cap"},
		{ClockIdle | ClockPowerCap | ClockHWSlowdown, "idle, power cap, hw slowdown"},
		{ClockSWThermal | ClockHWThermal | ClockHWPowerBrake, "sw thermal, hw thermal, hw power brake"},
		{ClockReliability | 1<<11 | 1<<40, "reliability, 0x10000000800"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%#x: %q, want %q", uint64(c.r), got, c.want)
		}
	}
	// Every named bit has its own name.
	seen := map[string]bool{}
	for r := ClockIdle; r <= ClockReliability; r <<= 1 {
		s := r.String()
		if seen[s] || s == "none" || s[0] == '0' {
			t.Errorf("%#x: %q", uint64(r), s)
		}
		seen[s] = true
	}
}

func TestClockReasonsHas(t *testing.T) {
	r := ClockPowerCap | ClockHWSlowdown
	if !r.Has(ClockPowerCap) || !r.Has(ClockPowerCap|ClockHWSlowdown) || r.Has(ClockHWThermal) || r.Has(ClockPowerCap|ClockIdle) {
		t.Fatal("Has")
	}
	if !r.Has(0) {
		t.Fatal("every set has the empty set")
	}
}

// The exported facts carry NVML's answer unchanged but for units:
// milliwatts become watts, and the reason bits keep NVML's values.
func TestNVMLFactsConversion(t *testing.T) {
	in := nvml.Facts{Available: true, Name: "NVIDIA H200", MemoryTotal: 100, MemoryUsed: 40, GPUUtil: 99, MemUtil: 30,
		Driver: "580.159.04", SMClockMHz: 1755, SMClockMaxMHz: 1980, PowerMW: 698_500, PowerLimitMW: 700_000,
		ClockReasons: 4 | 8, Refused: []string{"utilization: ERROR_NOT_SUPPORTED"}}
	want := NVMLFacts{Available: true, Name: "NVIDIA H200", MemoryTotal: 100, MemoryUsed: 40, GPUUtil: 99, MemUtil: 30,
		Driver: "580.159.04", SMClockMHz: 1755, SMClockMaxMHz: 1980, PowerW: 698.5, PowerLimitW: 700,
		ClockReasons: ClockPowerCap | ClockHWSlowdown, Refused: []string{"utilization: ERROR_NOT_SUPPORTED"}}
	if got := nvmlFacts(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got := nvmlFacts(nvml.Facts{Reason: "nvml init: ERROR_LIBRARY_NOT_FOUND"}); got.Available || got.Reason == "" {
		t.Fatalf("an unavailable NVML must say why: %+v", got)
	}
}

func TestNVMLOnSimulatorSaysWhy(t *testing.T) {
	p, _ := openSim(t)
	if f := p.NVML(); f.Available || f.Reason == "" || f.SMClockMHz != 0 || f.ClockReasons != 0 {
		t.Fatalf("%+v", f)
	}
}
