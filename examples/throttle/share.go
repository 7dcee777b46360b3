package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// The share mode (-mode share): WithGPUShare with no per-kernel tuning.
// For each workload a tenant on half the device runs beside an unlimited
// neighbour on the other half; the program measures the tenant's kernels/s
// unlimited (share 1, which is no limit at all) and at the target share,
// both beside the busy neighbour, in the same run, and reports the second
// as a fraction of the first (target: share ± 5%), with the device time
// each kept busy (kernels/s x metered kernel ms) beside it.
// Then it measures the lag after a change of share: the time from
// SetSMLimit(target) on a tenant launching at share 1 until its first
// launch that had to wait, against the refill period.

// shareWorkload is one kernel shape, with nothing tuned to it.
type shareWorkload struct {
	name   string
	n      int // chain elements
	steps  int
	launch func(ctx context.Context, s *fcsp.Stream) error // one kernel
	close  func()
}

// ShareRow is one workload's result.
type ShareRow struct {
	Workload   string  `json:"workload"`
	KernelMs   float64 `json:"kernel_ms"`   // mean GPU time per launch (metered)
	FullPerS   float64 `json:"full_per_s"`  // kernels/s unlimited (share 1), neighbour busy
	FullBusy   float64 `json:"full_busy"`   // FullPerS x its kernel ms: device time kept busy unlimited
	ShareBusy  float64 `json:"share_busy"`  // SharePerS x its kernel ms: device time at the target share
	SharePerS  float64 `json:"share_per_s"` // kernels/s at the target share, neighbour busy
	Fraction   float64 `json:"fraction"`    // SharePerS / FullPerS
	InBand     bool    `json:"in_band"`     // |Fraction - share| <= 0.05 share
	NeighbourS float64 `json:"neighbour_per_s"`
}

// ShareResult is the share mode's output.
type ShareResult struct {
	Device    string     `json:"device"`
	Share     float64    `json:"share"`
	Refill    string     `json:"refill_period"`
	Rows      []ShareRow `json:"rows"`
	LagMs     float64    `json:"lag_ms"` // SetSMLimit to the first throttled launch
	Simulated bool       `json:"simulated"`
}

// chainWorkloads are the day-94 chain kernel at two sizes. Hook for branch
// lib's examples/gemm: append cuBLAS GEMM workloads (1024^3 and 8192^3)
// here, each a launch func that runs one GEMM through the tenant's stream
// admission (its graph/library admission function), and the table gains
// their rows with nothing else to change.
func chainWorkloads(ctx context.Context, t *fcsp.Tenant) ([]shareWorkload, error) {
	var out []shareWorkload
	for _, size := range []struct {
		name     string
		n, steps int
	}{
		{"chain 1M x 2000", 1 << 20, 2000},
		{"chain 16M x 500", 1 << 24, 500},
	} {
		n := size.n
		if t.Pool().Device().Simulated {
			n /= 1024 // the fake runs the chain in Go
		}
		job, err := workload.NewJob(ctx, t, t.Stream(), n, size.steps, 1)
		if err != nil {
			return nil, err
		}
		out = append(out, shareWorkload{
			name: size.name, n: size.n, steps: size.steps,
			launch: func(ctx context.Context, s *fcsp.Stream) error { return job.Submit(ctx, s) },
		})
	}
	return out, nil
}

// busyFor launches on s until stop is set, synchronising every 16 launches
// so the count measures the GPU, not submission; it returns kernels/s.
func busyFor(ctx context.Context, s *fcsp.Stream, launch func(context.Context, *fcsp.Stream) error, d time.Duration, stop *atomic.Bool) (float64, error) {
	start := time.Now()
	n := 0
	for time.Since(start) < d && (stop == nil || !stop.Load()) {
		if err := launch(ctx, s); err != nil {
			return 0, err
		}
		if n++; n%16 == 0 {
			if err := s.Synchronize(); err != nil {
				return 0, err
			}
		}
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func runShare(ctx context.Context, share float64, d time.Duration, simulate bool) (ShareResult, error) {
	probe, err := open(ctx, simulate)
	if err != nil {
		return ShareResult{}, err
	}
	half := probe.Device().SMs / 2 / probe.Device().Granularity * probe.Device().Granularity
	simulate = probe.Device().Simulated
	probe.Close()
	const refill = time.Millisecond
	pool, err := open(ctx, simulate, fcsp.WithPartitionUnit(half), fcsp.WithRefillPeriod(refill))
	if err != nil {
		return ShareResult{}, err
	}
	defer pool.Close()
	res := ShareResult{Device: pool.Device().String(), Share: share, Refill: refill.String(), Simulated: pool.Device().Simulated}
	lim, err := pool.NewTenant("limited", fcsp.WithSMs(half), fcsp.WithGPUShare(1))
	if err != nil {
		return res, err
	}
	defer lim.Close()
	free, err := pool.NewTenant("unlimited", fcsp.WithSMs(half))
	if err != nil {
		return res, err
	}
	defer free.Close()
	mine, err := chainWorkloads(ctx, lim)
	if err != nil {
		return res, err
	}
	theirs, err := chainWorkloads(ctx, free)
	if err != nil {
		return res, err
	}
	for i, w := range mine {
		row := ShareRow{Workload: w.name}
		for _, phase := range []float64{1, share} {
			if err := lim.SetSMLimit(phase); err != nil {
				return res, err
			}
			before := lim.Stats()
			var wg sync.WaitGroup
			var errL, errF error
			var perS, nbr float64
			var stop atomic.Bool
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer stop.Store(true)
				perS, errL = busyFor(ctx, lim.Stream(), w.launch, d, nil)
			}()
			go func() {
				defer wg.Done()
				nbr, errF = busyFor(ctx, free.Stream(), theirs[i].launch, 2*d, &stop)
			}()
			wg.Wait()
			if err := errors.Join(errL, errF); err != nil {
				return res, err
			}
			after := lim.Stats()
			var kernelMs float64
			if n := after.Launches - before.Launches; n > 0 {
				kernelMs = float64(after.GPUTime-before.GPUTime) / float64(n) / 1e6
			}
			row.KernelMs = kernelMs
			if phase == 1 {
				row.FullPerS, row.FullBusy = perS, perS*kernelMs/1e3
			} else {
				row.SharePerS, row.NeighbourS, row.ShareBusy = perS, nbr, perS*kernelMs/1e3
			}
		}
		row.Fraction = row.SharePerS / row.FullPerS
		row.InBand = row.Fraction >= share*0.95 && row.Fraction <= share*1.05
		res.Rows = append(res.Rows, row)
	}
	lag, err := shareLag(ctx, lim, mine[0], share)
	if err != nil {
		return res, err
	}
	res.LagMs = float64(lag) / 1e6
	return res, nil
}

// shareLag launches at share 1, lowers the share, and returns the time
// until the first launch that had to wait (Stats.Throttled rises).
func shareLag(ctx context.Context, t *fcsp.Tenant, w shareWorkload, share float64) (time.Duration, error) {
	if err := t.SetSMLimit(1); err != nil {
		return 0, err
	}
	s := t.Stream()
	for range 64 { // running at full share
		if err := w.launch(ctx, s); err != nil {
			return 0, err
		}
	}
	before := t.Stats().Throttled
	changed := time.Now()
	if err := t.SetSMLimit(share); err != nil {
		return 0, err
	}
	for i := 0; ; i++ {
		if err := w.launch(ctx, s); err != nil {
			return 0, err
		}
		if t.Stats().Throttled > before {
			return time.Since(changed), s.Synchronize()
		}
		if i > 1<<16 {
			return 0, fmt.Errorf("no launch waited after the share fell to %v", share)
		}
	}
}

func printShare(r ShareResult) {
	fmt.Println(r.Device)
	fmt.Printf("WithGPUShare(%.2f) on half the device beside an unlimited neighbour on the other half; no per-kernel tuning; refill period %s\n", r.Share, r.Refill)
	fmt.Printf("%-18s %10s %12s %12s %10s %8s %10s %10s\n", "workload", "kernel ms", "unlimited/s", "share f /s", "fraction", "in band", "busy unl.", "busy f")
	for _, row := range r.Rows {
		fmt.Printf("%-18s %10.3f %12.1f %12.1f %10.4f %8v %10.4f %10.4f\n", row.Workload, row.KernelMs, row.FullPerS, row.SharePerS, row.Fraction, row.InBand, row.FullBusy, row.ShareBusy)
	}
	fmt.Printf("fraction = kernels/s at share %.2f / the same tenant's unlimited kernels/s (share 1: no limit), same run, both beside the busy neighbour (band %.4f..%.4f)\n", r.Share, 0.95*r.Share, 1.05*r.Share)
	fmt.Println("busy = kernels/s x metered kernel ms: the fraction of device time the tenant kept busy")
	fmt.Printf("lag after SetSMLimit(1 -> %.2f): %.3f ms to the first throttled launch (refill period %s)\n", r.Share, r.LagMs, r.Refill)
	if r.Simulated {
		fmt.Println("(simulated: kernels take no GPU time, so the fractions are not meaningful)")
	}
}
