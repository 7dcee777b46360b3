package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// On the simulator the program runs every mode end to end (the triads are
// computed and checked by the simulator's model) and says it is simulated;
// its timings mean nothing there.
func TestModesOnTheSimulator(t *testing.T) {
	cfg := Config{LatSMs: 16, Requests: 20, Interval: 100 * time.Microsecond, Floors: []float64{0.25, 0.1},
		Refill: 200 * time.Microsecond, NbBaseline: 5 * time.Millisecond, MaxDuration: time.Second, Simulate: true}
	r, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Simulated {
		t.Fatal("expected the simulator")
	}
	want := []string{"alone", "memory", "memory+floor 0.25", "memory+floor 0.1", "compute"}
	if len(r.Modes) != len(want) {
		t.Fatalf("%d modes, want %v", len(r.Modes), want)
	}
	for i, m := range r.Modes {
		if m.Name != want[i] || m.Requests != 20 {
			t.Fatalf("mode %d: %q with %d requests, want %q with 20", i, m.Name, m.Requests, want[i])
		}
		if m.Neighbour != "none" && (m.NbPerS <= 0 || m.NbBaseline <= 0) {
			t.Fatalf("mode %q: neighbour ran %.0f kernels/s (alone %.0f)", m.Name, m.NbPerS, m.NbBaseline)
		}
	}
	if r.NbSMs != 116 {
		t.Fatalf("neighbour on %d SMs, want the 116 beside 16 on the H200", r.NbSMs)
	}
	if r.Modes[0].P50VsAlone != 1 {
		t.Fatalf("alone over alone is %v", r.Modes[0].P50VsAlone)
	}
}

// The table names the arrays that ran: on the simulator 4096 floats (16
// KiB), not "0 MiB" (the simulator's arrays were once printed from a
// configuration zeroed to mean "small").
func TestTableNamesTheArraysThatRan(t *testing.T) {
	cfg := Config{LatSMs: 16, LatMiB: 128, NbMiB: 64, Requests: 5, Interval: 100 * time.Microsecond, Floors: []float64{0.25},
		Refill: 200 * time.Microsecond, NbBaseline: 5 * time.Millisecond, MaxDuration: time.Second, Simulate: true}
	r, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printTable(&b, r)
	out := b.String()
	if r.LatBytes != 16<<10 || r.NbBytes != 16<<10 || strings.Contains(out, " 0 MiB") ||
		!strings.Contains(out, "one triad over 16 KiB arrays per request (48 KiB moved)") || !strings.Contains(out, "simulated") {
		t.Errorf("arrays %d and %d bytes; table:\n%s", r.LatBytes, r.NbBytes, out)
	}
	for n, want := range map[uint64]string{128 << 20: "128 MiB", 3 << 30: "3 GiB", 48 << 10: "48 KiB", 1000: "1000 B", 1<<20 + 1<<10: "1025 KiB"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}
