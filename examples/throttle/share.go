package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/clocks"
	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// The share mode (-mode share): WithGPUShare with no per-kernel tuning.
// For each workload (the day-94 chain kernel at two sizes, and cuBLAS bf16
// GEMMs at 1024^3 and 8192^3 where cuBLAS and a GPU are present) a tenant
// on half the device runs beside an unlimited neighbour on the other half;
// the program measures the tenant's kernels/s unlimited (share 1, which is
// no limit at all) and at the target share, both beside the busy
// neighbour, in the same run, and reports the second as a fraction of the
// first (target: share ± 5%), with the device time each kept busy
// (kernels/s x metered kernel ms) beside it.
// Then, per workload, the lag after a change of share, both ways, against
// the refill period (see shareLag).

// shareWorkload is one kernel shape, with nothing tuned to it.
type shareWorkload struct {
	name   string
	launch func(ctx context.Context, s *fcsp.Stream) error // one kernel (or one GEMM)
	close  func(context.Context) error                     // nil: nothing to free
}

// ShareRow is one workload's result.
type ShareRow struct {
	Workload string  `json:"workload"`
	KernelMs float64 `json:"kernel_ms"`      // mean GPU time per launch at the share (metered; 0: not metered)
	FullMs   float64 `json:"full_kernel_ms"` // the same, unlimited
	// FullMHz and ShareMHz are the mean SM clock NVML saw during each
	// phase (0: NVML gave none): the chip clocks up when the limited
	// tenant idles, so its kernels may run faster at the share.
	FullMHz    float64 `json:"full_sm_mhz"`
	ShareMHz   float64 `json:"share_sm_mhz"`
	FullPerS   float64 `json:"full_per_s"`  // kernels/s unlimited (share 1), neighbour busy
	FullBusy   float64 `json:"full_busy"`   // FullPerS x its kernel ms: device time kept busy unlimited
	ShareBusy  float64 `json:"share_busy"`  // SharePerS x its kernel ms: device time at the target share
	SharePerS  float64 `json:"share_per_s"` // kernels/s at the target share, neighbour busy
	Fraction   float64 `json:"fraction"`    // SharePerS / FullPerS
	InBand     bool    `json:"in_band"`     // |ShareBusy - share| <= 0.05 share (|Fraction - share| where not metered)
	NeighbourS float64 `json:"neighbour_per_s"`
	Lag        Lag     `json:"lag"`
}

// ShareResult is the share mode's output.
type ShareResult struct {
	Device    string     `json:"device"`
	Share     float64    `json:"share"`
	Refill    string     `json:"refill_period"`
	RefillMs  float64    `json:"refill_ms"`
	Rows      []ShareRow `json:"rows"`
	Skipped   []string   `json:"skipped,omitempty"` // workloads not run, and why
	Simulated bool       `json:"simulated"`
}

// chainWorkloads are the day-94 chain kernel at two sizes.
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
			name:   size.name,
			launch: func(ctx context.Context, s *fcsp.Stream) error { return job.Submit(ctx, s) },
		})
	}
	return out, nil
}

// gemmWorkloads are cuBLAS bf16 GEMMs at 1024^3 and 8192^3 on t, each
// run inside Tenant.Do (examples/internal/gemmjob), the way examples/gemm
// runs them: Do is where the SDK meters and admits library work. They run
// on the tenant's default stream, so launch ignores its stream argument.
func gemmWorkloads(ctx context.Context, t *fcsp.Tenant) ([]shareWorkload, error) {
	var out []shareWorkload
	for _, n := range []int{1024, 8192} {
		j, err := gemmjob.New(ctx, t, n, n, n)
		if err != nil {
			return nil, errors.Join(err, closeAll(ctx, out))
		}
		if err := errors.Join(j.Run(ctx), j.Check()); err != nil { // a wrong GEMM measures nothing
			return nil, errors.Join(err, j.Close(ctx), closeAll(ctx, out))
		}
		out = append(out, shareWorkload{
			name:   fmt.Sprintf("GEMM %d^3 bf16", n),
			launch: func(ctx context.Context, _ *fcsp.Stream) error { return j.Run(ctx) },
			close:  func(ctx context.Context) error { return errors.Join(j.Check(), j.Close(ctx)) },
		})
	}
	return out, nil
}

func closeAll(ctx context.Context, ws []shareWorkload) error {
	var errs []error
	for _, w := range ws {
		if w.close != nil {
			errs = append(errs, w.close(ctx))
		}
	}
	return errors.Join(errs...)
}

// busyFor launches on s until stop is set, synchronising every 16 launches
// so the count measures the GPU, not submission; it returns kernels/s and
// how many it launched.
func busyFor(ctx context.Context, s *fcsp.Stream, launch func(context.Context, *fcsp.Stream) error, d time.Duration, stop *atomic.Bool) (float64, int, error) {
	start := time.Now()
	n := 0
	for time.Since(start) < d && (stop == nil || !stop.Load()) {
		if err := launch(ctx, s); err != nil {
			return 0, n, err
		}
		if n++; n%16 == 0 {
			if err := s.Synchronize(); err != nil {
				return 0, n, err
			}
		}
	}
	if err := s.Synchronize(); err != nil {
		return 0, n, err
	}
	return float64(n) / time.Since(start).Seconds(), n, nil
}

func runShare(ctx context.Context, share float64, d time.Duration, simulate, gemms bool, cublasPath string) (ShareResult, error) {
	probe, err := open(ctx, simulate)
	if err != nil {
		return ShareResult{}, err
	}
	half := probe.Device().SMs / 2 / probe.Device().Granularity * probe.Device().Granularity
	simulate = probe.Device().Simulated
	probe.Close()
	const refill = time.Millisecond
	pool, err := open(ctx, simulate, fcsp.WithPartitionUnit(half), fcsp.WithLimiterTuning(fcsp.LimiterTuning{RefillPeriod: refill}))
	if err != nil {
		return ShareResult{}, err
	}
	defer pool.Close()
	res := ShareResult{Device: pool.Device().String(), Share: share, Refill: refill.String(), RefillMs: float64(refill) / 1e6, Simulated: pool.Device().Simulated}
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
	switch {
	case !gemms:
		res.Skipped = append(res.Skipped, "cuBLAS GEMM rows: not asked for (-gemm=false)")
	case res.Simulated:
		res.Skipped = append(res.Skipped, "cuBLAS GEMM rows: skipped on the simulator (cuBLAS needs a GPU)")
	default:
		if _, err := gemmjob.LoadCublas(cublasPath); err != nil {
			res.Skipped = append(res.Skipped, fmt.Sprintf("cuBLAS GEMM rows: skipped, no cuBLAS (%v); give its path with -cublas", err))
			break
		}
		gm, err := gemmWorkloads(ctx, lim)
		if err != nil {
			return res, fmt.Errorf("GEMM workloads: %w", err)
		}
		defer closeAll(ctx, gm)
		gt, err := gemmWorkloads(ctx, free)
		if err != nil {
			return res, fmt.Errorf("GEMM workloads: %w", err)
		}
		defer closeAll(ctx, gt)
		mine, theirs = append(mine, gm...), append(theirs, gt...)
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
			var n int
			var stop atomic.Bool
			stopClocks := clocks.Sample(pool.NVML, clocks.Every)
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer stop.Store(true)
				perS, n, errL = busyFor(ctx, lim.Stream(), w.launch, d, nil)
			}()
			go func() {
				defer wg.Done()
				nbr, _, errF = busyFor(ctx, free.Stream(), theirs[i].launch, 2*d, &stop)
			}()
			wg.Wait()
			clk := stopClocks()
			if err := errors.Join(errL, errF); err != nil {
				return res, fmt.Errorf("%s at share %v: %w", w.name, phase, err)
			}
			after := lim.Stats()
			var kernelMs float64
			if n > 0 { // per workload launch: a GEMM may be several kernels
				kernelMs = float64(after.GPUTime-before.GPUTime) / float64(n) / 1e6
			}
			if phase == 1 {
				row.FullPerS, row.FullBusy, row.FullMs, row.FullMHz = perS, perS*kernelMs/1e3, kernelMs, clk.SMClockMHz
			} else {
				row.SharePerS, row.NeighbourS, row.ShareBusy, row.KernelMs, row.ShareMHz = perS, nbr, perS*kernelMs/1e3, kernelMs, clk.SMClockMHz
			}
		}
		row.Fraction = row.SharePerS / row.FullPerS
		// What the SDK promises is GPU time: the device time the tenant
		// kept busy at the share. Its throughput moves with the SM clock,
		// which rises when the tenant is held back (GEMM 1024^3 on the H200:
		// 0.2242 of its unlimited kernels/s, 8192^3 0.2759, each at exactly
		// 0.250 of the device's time, 1784 against 1978 MHz), so the
		// fraction of kernels/s is reported beside it with the clocks, not
		// asserted. Work the SDK does not meter (kernel ms 0) falls back to
		// the fraction.
		if row.KernelMs > 0 {
			row.InBand = row.ShareBusy >= share*0.95 && row.ShareBusy <= share*1.05
		} else {
			row.InBand = row.Fraction >= share*0.95 && row.Fraction <= share*1.05
		}
		if row.Lag, err = shareLag(ctx, lim, w, share); err != nil {
			return res, fmt.Errorf("%s: lag: %w", w.name, err)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// Lag is how long the old share governs after a change, each way (ms).
type Lag struct {
	// DownMs: SetSMLimit(1 -> share) to the start of the tenant's first
	// launch that had to wait (-1: none waited within the window).
	// DownReturnMs is when that launch returned, its wait included (what
	// the first H200 run reported as the lag: 1.21 ms).
	DownMs       float64 `json:"down_ms"`
	DownReturnMs float64 `json:"down_return_ms"`
	// UpMs: SetSMLimit(share -> 1) until every launch that began before
	// SetSMLimit returned has returned: the longest any launch was held at
	// the old share. WaitedAfterUp counts launches begun after the change
	// that waited anyway (at share 1: must be 0).
	UpMs          float64 `json:"up_ms"`
	WaitedAfterUp int     `json:"waited_after_up"`
}

// span is one launch as the tenant saw it, in time since the measurement
// began.
type span struct {
	start, end time.Duration
	waited     bool // Stats.Throttled rose across it
}

// lagDepth is how many launches the lag measurement keeps queued: the GPU
// paces the tenant, as it does a tenant running flat out, without the
// batch Synchronize of busyFor, which would stall the launcher for up to
// 16 kernels and count that as lag.
const lagDepth = 2

// launchAround launches w on t's stream from a goroutine for before, makes
// the change, launches on for after, and returns every launch's span and
// when the change began (t0) and returned (t1).
func launchAround(ctx context.Context, t *fcsp.Tenant, w shareWorkload, before, after time.Duration, change func() error) (spans []span, t0, t1 time.Duration, err error) {
	s := t.Stream()
	var ring [lagDepth]*fcsp.Event
	for i := range ring {
		if ring[i], err = t.NewEvent(); err != nil {
			return nil, 0, 0, err
		}
		defer ring[i].Close()
	}
	begin := time.Now()
	var stop atomic.Bool
	done := make(chan error, 1)
	go func() {
		for i := 0; !stop.Load(); i++ {
			ev := ring[i%lagDepth]
			if i >= lagDepth { // at most lagDepth launches queued
				if err := ev.Synchronize(); err != nil {
					done <- err
					return
				}
			}
			th := t.Stats().Throttled
			sp := span{start: time.Since(begin)}
			if err := w.launch(ctx, s); err != nil {
				done <- err
				return
			}
			sp.end = time.Since(begin)
			sp.waited = t.Stats().Throttled > th
			spans = append(spans, sp)
			if err := ev.Record(s); err != nil {
				done <- err
				return
			}
		}
		done <- s.Synchronize()
	}()
	time.Sleep(before)
	t0 = time.Since(begin)
	cerr := change()
	t1 = time.Since(begin)
	time.Sleep(after)
	stop.Store(true)
	err = errors.Join(<-done, cerr)
	return spans, t0, t1, err
}

// shareLag measures the lag after a change of share, both ways, on a
// tenant launching w back to back: down from share 1 (no limit; its
// bucket full) to share, and up from share to 1, where a launch waiting
// at the old share must be let go at once.
func shareLag(ctx context.Context, t *fcsp.Tenant, w shareWorkload, share float64) (Lag, error) {
	const before, after = 20 * time.Millisecond, 20 * time.Millisecond
	lag := Lag{DownMs: -1, DownReturnMs: -1}
	if err := t.SetSMLimit(1); err != nil {
		return lag, err
	}
	spans, t0, _, err := launchAround(ctx, t, w, before, after, func() error { return t.SetSMLimit(share) })
	if err != nil {
		return lag, err
	}
	for _, sp := range spans {
		if sp.waited && sp.end >= t0 {
			lag.DownMs = ms(max(sp.start-t0, 0))
			lag.DownReturnMs = ms(sp.end - t0)
			break
		}
	}
	spans, t0, t1, err := launchAround(ctx, t, w, before, after, func() error { return t.SetSMLimit(1) })
	if err != nil {
		return lag, err
	}
	var held time.Duration
	for _, sp := range spans {
		if sp.start <= t1 && sp.end >= t0 {
			held = max(held, sp.end-t0)
		}
		if sp.start > t1 && sp.waited {
			lag.WaitedAfterUp++
		}
	}
	lag.UpMs = ms(held)
	return lag, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// lagOK reports whether both lags are within one refill period (a down
// lag of -1, nothing throttled, is not). Work whose one launch outlasts
// the period (GEMM 8192^3: about 2.4 ms on 64 SMs) is judged against one
// launch instead: a launch admitted just before the change runs that long,
// and the launcher cannot ask again sooner.
func (r ShareResult) lagOK(row ShareRow) bool {
	l, bound := row.Lag, max(r.RefillMs, row.KernelMs)
	return l.DownMs >= 0 && l.DownMs <= bound && l.UpMs <= bound && l.WaitedAfterUp == 0
}

func printShare(r ShareResult) {
	fmt.Println(r.Device)
	fmt.Printf("WithGPUShare(%.2f) on half the device beside an unlimited neighbour on the other half; no per-kernel tuning; refill period %s\n", r.Share, r.Refill)
	fmt.Printf("%-18s %16s %12s %12s %10s %8s %10s %10s %14s\n", "workload", "kernel ms unl./f", "unlimited/s", "share f /s", "fraction", "in band", "busy unl.", "busy f", "SM MHz unl./f")
	for _, row := range r.Rows {
		fmt.Printf("%-18s %7.3f /%7.3f %12.1f %12.1f %10.4f %8v %10.4f %10.4f %6.0f /%6.0f\n", row.Workload, row.FullMs, row.KernelMs, row.FullPerS, row.SharePerS, row.Fraction, row.InBand, row.FullBusy, row.ShareBusy, row.FullMHz, row.ShareMHz)
	}
	for _, sk := range r.Skipped {
		fmt.Println(sk)
	}
	fmt.Printf("fraction = kernels/s at share %.2f / the same tenant's unlimited kernels/s (share 1: no limit), same run, both beside the busy neighbour: reported, not asserted (it moves with the SM clock)\n", r.Share)
	fmt.Printf("busy = kernels/s x metered kernel ms: the fraction of device time the tenant kept busy, what the share promises; in band: busy f within %.4f..%.4f (kernel ms 0, not metered: the fraction instead)\n", 0.95*r.Share, 1.05*r.Share)
	fmt.Println("SM MHz = the mean SM clock NVML saw in each phase (0: none): a kernel that runs faster at the share than unlimited ran at a higher clock")
	fmt.Printf("\nlag after a change of share, against the refill period (%s); goal: at most one period each way\n", r.Refill)
	fmt.Printf("%-18s %16s %18s %14s %14s %8s\n", "workload", "down 1->f ms", "(its return) ms", "up f->1 ms", "waited after", "ok")
	for _, row := range r.Rows {
		l := row.Lag
		down := fmt.Sprintf("%.3f", l.DownMs)
		if l.DownMs < 0 {
			down = "none waited"
		}
		fmt.Printf("%-18s %16s %18.3f %14.3f %14d %8v\n", row.Workload, down, l.DownReturnMs, l.UpMs, l.WaitedAfterUp, r.lagOK(row))
	}
	fmt.Println("down = SetSMLimit(1 -> f) to the start of the first launch that had to wait (its return: with that wait); up = SetSMLimit(f -> 1) until every launch begun before it returned has returned; waited after = launches begun after the raise that still waited")
	fmt.Printf("launches paced by the GPU (%d queued); ok: both lags within the period (or one launch, where a launch outlasts it) and none waited after the raise\n", lagDepth)
	if r.Simulated {
		fmt.Println("(simulated: the fake runs kernels on the CPU inside the launch call, so neither the fractions nor the lags are meaningful)")
	}
}
