package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Cell is one measurement: a layout, K request goroutines per class and a
// storm kind, in one round.
type Cell struct {
	Round     int    `json:"round"`
	Layout    string `json:"layout"`
	K         int    `json:"k"`
	BatchK    int    `json:"batch_k,omitempty"` // batch goroutines: K unless -batch-k
	Storm     string `json:"storm"`
	StormG    int    `json:"storm_goroutines_per_class_per_kind"`
	Work      string `json:"work"` // cublas or chain
	Simulated bool   `json:"simulated,omitempty"`
	InterSMs  int    `json:"interactive_sms"`
	BatchSMs  int    `json:"batch_sms,omitempty"`

	Requests    int     `json:"interactive_requests"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	MaxUs       float64 `json:"max_us"`
	ReqPerS     float64 `json:"interactive_req_per_s"`
	BatchGEMMs  int64   `json:"batch_requests,omitempty"`
	BatchTFLOPs float64 `json:"batch_tflops,omitempty"`
	// CPU is the process's CPU seconds (user + system) over the wall
	// seconds of the measurement: cores busy. Under MPS it is the
	// interactive process's.
	CPU float64 `json:"cpu_cores"`
	// StormPerS is the calls each storm kind made per second, all its
	// goroutines together: what the pacing achieved.
	StormPerS map[string]float64 `json:"storm_calls_per_s,omitempty"`
	Seconds   float64            `json:"seconds"`
	// CtxWait is the interactive tenant's Stats().ContextWait over the
	// window: calls that took one of its contexts, how many found none
	// free, and the P99 and max wait the SDK reports at the window's end
	// (over its recent calls).
	CtxWaitCalls uint64  `json:"ctx_wait_calls"`
	CtxWaited    uint64  `json:"ctx_waited"`
	CtxWaitP99us float64 `json:"ctx_wait_p99_us"`
	CtxWaitMaxUs float64 `json:"ctx_wait_max_us"`

	// The Go runtime over the window (runtime/metrics): the P99 of how long
	// runnable goroutines waited for a thread, the longest stop of the
	// world for the collector, collections a second and bytes allocated a
	// second (MB). Under MPS, the interactive process's.
	SchedP99us   float64 `json:"sched_latency_p99_us"`
	GCPauseMaxUs float64 `json:"gc_pause_max_us"`
	GCPauseP50us float64 `json:"gc_pause_p50_us"`
	GCStopMaxUs  float64 `json:"gc_stopping_max_us"` // of the pause, stopping the goroutines
	GCPerS       float64 `json:"gc_per_s"`
	// RunDelay is how long the process's threads were runnable but not
	// running, waiting for a core (Linux schedstat, all threads), per wall
	// second: the host's own contention, which no Go figure shows.
	RunDelayMsPerS float64 `json:"os_run_delay_ms_per_s"`
	AllocMBPerS    float64 `json:"alloc_mb_per_s"`

	// Ratios to the cell with no storm of the same layout, K and round.
	P99ToNoStorm   float64 `json:"p99_to_no_storm,omitempty"`
	BatchToNoStorm float64 `json:"batch_to_no_storm,omitempty"`
}

// window says when a cell measures: after a warm-up, for a duration, in
// one process; or when another process says (MPS).
type window interface {
	waitStart(ctx context.Context) error
	waitEnd(ctx context.Context) error
}

// timed is the in-process window.
type timed struct{ warmup, duration time.Duration }

func (w timed) waitStart(ctx context.Context) error { return sleepCtx(ctx, w.warmup) }
func (w timed) waitEnd(ctx context.Context) error   { return sleepCtx(ctx, w.duration) }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cellEnv is what one cell runs on: the classes present (either may be
// nil under MPS, where each process has one) and the storm's pool.
type cellEnv struct {
	inter, batch *class
	storm        *stormEnv
	// stormTenants are the tenants the storm's calls go to; by default
	// the classes' own.
	stormTenants []*fcsp.Tenant
}

// cellOpts is a cell's shape.
type cellOpts struct {
	k      int
	batchK int // batch goroutines (the interactive class has k)
	kind   string
	stormG int
	pace   time.Duration
	probe  time.Duration // every this long a %smid probe on each class
}

// sample is one interactive request: when it started and how long it took.
type sample struct {
	start time.Time
	us    float64
}

// runCell runs the requests, the storm and the probes together and
// measures inside w's window.
func runCell(ctx context.Context, env cellEnv, o cellOpts, w window) (Cell, error) {
	c := Cell{K: o.k, BatchK: o.batchK, Storm: o.kind, StormG: o.stormG}
	if env.batch == nil {
		c.BatchK = 0
	}
	if o.kind == stormNone {
		c.StormG = 0
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	tenants := env.stormTenants
	if tenants == nil {
		for _, cl := range []*class{env.inter, env.batch} {
			if cl != nil {
				tenants = append(tenants, cl.t)
			}
		}
	}
	st := startStorm(ctx, env.storm, tenants, kindsOf(o.kind), o.stormG, o.pace, stop)

	// Probes: every o.probe on each class, on their own streams.
	for _, cl := range []*class{env.inter, env.batch} {
		if cl == nil || cl.probe == nil || o.probe <= 0 {
			continue
		}
		wg.Go(func() {
			tick := time.NewTicker(o.probe)
			defer tick.Stop()
			for {
				if err := cl.probe.once(ctx); err != nil {
					fail(err)
					return
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
	}

	// Batch: two requests in flight per goroutine, back to back.
	var batchDone atomic.Int64
	if env.batch != nil {
		for _, wk := range env.batch.workers[:o.batchK] {
			wg.Go(func() {
				for !stopped() {
					if err := errors.Join(wk.Run(ctx), wk.Run(ctx), wk.Stream().Synchronize()); err != nil {
						fail(err)
						return
					}
					batchDone.Add(2)
				}
			})
		}
	}

	// Interactive: one request at a time per goroutine, each waited for.
	// Room for a cell's samples made before it starts: a request loop that
	// grows its slice makes garbage, and a goroutine that allocates while
	// the collector runs is made to help it, which would be measured.
	lats := make([][]sample, o.k)
	if env.inter != nil {
		for i, wk := range env.inter.workers[:o.k] {
			lats[i] = make([]sample, 0, 1<<16)
			wg.Go(func() {
				for !stopped() {
					t0 := time.Now()
					if err := errors.Join(wk.Run(ctx), wk.Stream().Synchronize()); err != nil {
						fail(err)
						return
					}
					lats[i] = append(lats[i], sample{t0, float64(time.Since(t0).Nanoseconds()) / 1e3})
				}
			})
		}
	}

	ctxWait := func() (w fcsp.WaitStats) {
		if env.inter != nil {
			w = env.inter.t.Stats().ContextWait
		}
		return w
	}
	werr := w.waitStart(ctx)
	t0, cpu0, b0, s0, cw0, rt0, rd0 := time.Now(), cpuSeconds(), batchDone.Load(), st.snapshot(), ctxWait(), readRuntime(), runDelay()
	startTrace(o.kind)
	if werr == nil {
		werr = w.waitEnd(ctx)
	}
	t1, cpu1, b1, s1, cw1, rt1, rd1 := time.Now(), cpuSeconds(), batchDone.Load(), st.snapshot(), ctxWait(), readRuntime(), runDelay()
	c.CtxWaitCalls, c.CtxWaited = cw1.Calls-cw0.Calls, cw1.Waited-cw0.Waited
	c.CtxWaitP99us, c.CtxWaitMaxUs = float64(cw1.P99.Nanoseconds())/1e3, float64(cw1.Max.Nanoseconds())/1e3
	close(stop)
	wg.Wait()
	fail(st.wait())
	fail(werr)
	if len(errs) > 0 {
		return c, errors.Join(errs...)
	}
	el := t1.Sub(t0).Seconds()
	c.Seconds = el
	c.CPU = (cpu1 - cpu0) / el
	c.SchedP99us = histQuantile(rt0.sched, rt1.sched, 0.99)
	c.GCPauseMaxUs = histQuantile(rt0.pauses, rt1.pauses, 1)
	c.GCPauseP50us = histQuantile(rt0.pauses, rt1.pauses, 0.5)
	c.GCStopMaxUs = histQuantile(rt0.stopping, rt1.stopping, 1)
	c.GCPerS = float64(rt1.gcs-rt0.gcs) / el
	c.RunDelayMsPerS = (rd1 - rd0).Seconds() * 1e3 / el
	c.AllocMBPerS = float64(rt1.allocs-rt0.allocs) / el / 1e6
	if env.inter != nil {
		var us []float64
		for _, l := range lats {
			for _, s := range l {
				if !s.start.Before(t0) && s.start.Add(time.Duration(s.us*1e3)).Before(t1) {
					us = append(us, s.us)
				}
			}
		}
		slices.Sort(us)
		c.Requests = len(us)
		c.P50us, c.P99us, c.MaxUs = pct(us, 0.50), pct(us, 0.99), pct(us, 1)
		c.ReqPerS = float64(len(us)) / el
	}
	if env.batch != nil {
		c.BatchGEMMs = b1 - b0
		c.BatchTFLOPs = float64(c.BatchGEMMs) * env.batch.flops / el / 1e12
	}
	if len(s1) > 0 {
		c.StormPerS = map[string]float64{}
		for k, n := range s1 {
			c.StormPerS[k] = float64(n-s0[k]) / el
		}
	}
	return c, nil
}

// pct is the nearest-rank quantile of sorted values.
func pct(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// cpuSeconds is the process's user + system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
