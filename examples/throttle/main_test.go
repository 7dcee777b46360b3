package main

import (
	"context"
	"math"
	"strings"
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

// The share mode runs on the simulator end to end: both chain rows, a line
// saying why the GEMM rows were skipped, and a lag each way per row (their
// values mean nothing there: the fake runs kernels inside the launch call).
func TestShareModeOnTheSimulator(t *testing.T) {
	r, err := runShare(context.Background(), 0.25, 20*time.Millisecond, true, true, "")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Simulated || len(r.Rows) != 2 || len(r.Skipped) != 1 || !strings.Contains(r.Skipped[0], "GEMM") {
		t.Fatalf("rows %+v, skipped %q", r.Rows, r.Skipped)
	}
	for _, row := range r.Rows {
		if row.FullPerS <= 0 || row.SharePerS <= 0 || row.Lag.UpMs < 0 {
			t.Errorf("%s: %+v", row.Workload, row)
		}
	}
}

func TestLagOK(t *testing.T) {
	r := ShareResult{RefillMs: 1}
	for _, tc := range []struct {
		row  ShareRow
		want bool
	}{
		{ShareRow{KernelMs: 0.17, Lag: Lag{DownMs: 0.3, UpMs: 0.01}}, true},
		{ShareRow{KernelMs: 0.17, Lag: Lag{DownMs: 1.21, UpMs: 0.01}}, false},      // the first H200 run
		{ShareRow{KernelMs: 0.17, Lag: Lag{DownMs: -1}}, false},                    // nothing throttled
		{ShareRow{KernelMs: 0.17, Lag: Lag{DownMs: 0.3, UpMs: 1.5}}, false},        // held at the old share
		{ShareRow{KernelMs: 0.17, Lag: Lag{DownMs: 0.3, WaitedAfterUp: 1}}, false}, // waited at share 1
		{ShareRow{KernelMs: 2.4, Lag: Lag{DownMs: 2.1, UpMs: 0.01}}, true},         // one launch outlasts the period
	} {
		if got := r.lagOK(tc.row); got != tc.want {
			t.Errorf("lagOK(%+v) = %v, want %v", tc.row, got, tc.want)
		}
	}
}

// The printed ratio is the printed rates' ratio: each phase keeps its own
// unlimited rate (the NCCL phase once overwrote the first phase's, so the
// output showed one phase's rate beside another phase's ratio).
func TestRatiosMatchTheirRates(t *testing.T) {
	r, err := run(context.Background(), 0.25, 200*time.Millisecond, true)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
	if !near(r.Ratio, r.LimitedPerS/r.UnlimitedPerS) {
		t.Errorf("ratio %g, but limited %g / unlimited %g = %g", r.Ratio, r.LimitedPerS, r.UnlimitedPerS, r.LimitedPerS/r.UnlimitedPerS)
	}
	if !near(r.NCCLVsFree, r.NCCLPerS/r.UnlimitedNCCLPhasePerS) {
		t.Errorf("nccl_vs_unlimited %g, but nccl %g / unlimited in that phase %g", r.NCCLVsFree, r.NCCLPerS, r.UnlimitedNCCLPhasePerS)
	}
}
