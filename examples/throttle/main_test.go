package main

import (
	"context"
	"testing"
	"time"
)

// On the simulator kernels take no time, so only the limited tenant's rate
// means something: 25% of one 1 ms wave per refill period is 250 kernels/s.
func TestLimitedRateOnTheSimulator(t *testing.T) {
	r, err := run(context.Background(), 0.25, 400*time.Millisecond, true)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Simulated {
		t.Fatal("expected the simulator")
	}
	if r.LimitedPerS < 50 || r.LimitedPerS > 300 { // upper bound: the limit holds; lower: it runs at all on a loaded CI machine
		t.Fatalf("limited tenant ran %.1f kernels/s; want about 250", r.LimitedPerS)
	}
	if r.NCCLPerS < 10*r.LimitedPerS {
		t.Fatalf("NCCL-class stream ran %.1f kernels/s, not much above the limited %.1f", r.NCCLPerS, r.LimitedPerS)
	}
}
