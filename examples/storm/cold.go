package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// The cold start: 16 request goroutines on a
// fresh interactive tenant (16 SMs; the batch class on the rest runs
// throughout), measured from their first request: the P50/P99/max over
// their first -coldstart window against the steady ones after it. Each
// variant is how the tenant was readied:
//
//	cold    nothing: the first requests make the contexts and load
//	        cuBLAS's kernels in each, beside the batch's GEMMs
//	warmup  fcsp.WithWarmup(gemmjob.Warmup(...)): the SDK warms every
//	        context at NewTenant; no DoEach call (the must-show's case)
//	doeach  Tenant.DoEach before serving, by hand, as before WithWarmup
//
// The must-show: with warmup, the first window's P99 at most 2x the
// steady P99 and no request over 5 ms.
//
//	storm -coldstart 1s/2s [-cold-variants cold,warmup,doeach] [-rounds 3]

var coldVariants = []string{"cold", "warmup", "doeach"}

type coldCfg struct {
	first, steady time.Duration
	variants      []string
}

// ColdRow is one variant in one round.
type ColdRow struct {
	Round          int     `json:"round"`
	Variant        string  `json:"variant"`
	Work           string  `json:"work"`
	Simulated      bool    `json:"simulated,omitempty"`
	NewTenantMs    float64 `json:"new_tenant_ms"` // NewTenant (with the warm-up's runs, paid before serving)
	ReadyMs        float64 `json:"ready_ms"`      // the workers made (and doeach's DoEach), beside the busy batch
	FirstRequests  int     `json:"first_requests"`
	FirstP50       float64 `json:"first_p50_us"`
	FirstP99       float64 `json:"first_p99_us"`
	FirstMax       float64 `json:"first_max_us"`
	SteadyRequests int     `json:"steady_requests"`
	SteadyP50      float64 `json:"steady_p50_us"`
	SteadyP99      float64 `json:"steady_p99_us"`
	SteadyMax      float64 `json:"steady_max_us"`
	FirstToSteady  float64 `json:"first_p99_to_steady_p99"`
	BatchTFLOP     float64 `json:"batch_tflops"`
}

// parsePair reads -flag a/b, two positive durations.
func parsePair(flagName, spec, example string) (a, b time.Duration, err error) {
	as, bs, ok := strings.Cut(spec, "/")
	if ok {
		if a, err = time.ParseDuration(as); err == nil {
			b, err = time.ParseDuration(bs)
		}
	}
	if !ok || err != nil || a <= 0 || b <= 0 {
		return 0, 0, fmt.Errorf("%w: -%s %q: want two durations, e.g. %s", ErrBadValue, flagName, spec, example)
	}
	return a, b, nil
}

// runCold runs every variant in every round and reports.
func runCold(ctx context.Context, op *opener, cfg config, haveCublas bool, out io.Writer) ([]ColdRow, error) {
	c := cfg.cold
	fmt.Fprintf(out, "storm -coldstart: 16 request goroutines on a fresh 16-SM tenant beside the batch class, first %v against the %v after it, variants %s, %d round(s)\n",
		c.first, c.steady, strings.Join(c.variants, ","), cfg.rounds)
	var rows []ColdRow
	for round := 1; round <= cfg.rounds; round++ {
		for _, v := range c.variants {
			r, err := runColdCell(ctx, op, cfg, haveCublas, v)
			if err != nil {
				return rows, fmt.Errorf("round %d, %s: %w", round, v, err)
			}
			r.Round = round
			fmt.Fprintf(out, "round %d %-6s NewTenant %.1f ms, ready %.1f ms; first %v: P50/P99/max %.0f/%.0f/%.0f us (%d); steady: %.0f/%.0f/%.0f us (%d); %.2fx; batch %.1f TFLOP/s [%s]\n",
				round, v, r.NewTenantMs, r.ReadyMs, c.first, r.FirstP50, r.FirstP99, r.FirstMax, r.FirstRequests,
				r.SteadyP50, r.SteadyP99, r.SteadyMax, r.SteadyRequests, r.FirstToSteady, r.BatchTFLOP, r.Work)
			rows = append(rows, r)
		}
	}
	writeColdReport(out, rows, c)
	return rows, nil
}

// coldWarmup is the warmup variant's WithWarmup function: cuBLAS's first
// GEMM of the interactive shape in each context; on the chain (no cuBLAS,
// the simulator) nothing but the contexts' making.
func coldWarmup(wk workKind) func(fcsp.Current) error {
	if wk.cublas {
		return gemmjob.Warmup(interM, interN, interK)
	}
	return func(fcsp.Current) error { return nil }
}

func runColdCell(ctx context.Context, op *opener, cfg config, haveCublas bool, variant string) (row ColdRow, err error) {
	c := cfg.cold
	row.Variant = variant
	pool, err := op.open(ctx)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, pool.Close()) }()
	wk := workFor(pool, haveCublas)
	row.Work, row.Simulated = wk.String(), pool.Device().Simulated
	// The interactive tenant first (its SMs taken before the batch takes
	// the rest), its workers made once the batch is busy; only doeach
	// runs them (and DoEach) before serving. NewTenant's time is a quiet
	// device's: WithWarmup's runs are paid there.
	opts := []fcsp.TenantOption{fcsp.WithSMs(16)}
	if variant == "warmup" {
		opts = append(opts, fcsp.WithWarmup(coldWarmup(wk)))
	}
	t0 := time.Now()
	it, err := pool.NewTenant("interactive", opts...)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	row.NewTenantMs = float64(time.Since(t0).Microseconds()) / 1e3
	bt, err := pool.NewTenant("batch", fcsp.WithRestOfSMs())
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, bt.Close()) }()
	batch, err := newClass(ctx, "batch", bt, true, max(cfg.batchK, 2), wk)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, batch.close(ctx)) }()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(e error) {
		mu.Lock()
		errs = append(errs, e)
		mu.Unlock()
	}
	var counting atomic.Bool
	var batchDone atomic.Int64
	for _, w := range batch.workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if e := errors.Join(w.Run(ctx), w.Run(ctx), w.Stream().Synchronize()); e != nil {
					fail(e)
					return
				}
				if counting.Load() {
					batchDone.Add(2)
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
		err = errors.Join(err, errors.Join(errs...))
	}()
	if err := sleepCtx(ctx, cfg.warmup); err != nil {
		return row, err
	}
	t1 := time.Now()
	inter, err := makeClass(ctx, "interactive", it, false, 16, wk, variant == "doeach")
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, inter.close(ctx)) }()
	row.ReadyMs = float64(time.Since(t1).Microseconds()) / 1e3

	start := time.Now()
	split, end := start.Add(c.first), start.Add(c.first+c.steady)
	counting.Store(true)
	lats := make([][]sample, len(inter.workers))
	var rg sync.WaitGroup
	for i, w := range inter.workers {
		lats[i] = make([]sample, 0, 1<<16)
		rg.Go(func() {
			for time.Now().Before(end) {
				s := time.Now()
				if e := errors.Join(w.Run(ctx), w.Stream().Synchronize()); e != nil {
					fail(e)
					return
				}
				lats[i] = append(lats[i], sample{s, float64(time.Since(s).Nanoseconds()) / 1e3})
			}
		})
	}
	rg.Wait()
	counting.Store(false)
	el := time.Since(start).Seconds()
	var first, steady []float64
	for _, l := range lats {
		for _, s := range l {
			if s.start.Before(split) {
				first = append(first, s.us)
			} else {
				steady = append(steady, s.us)
			}
		}
	}
	slices.Sort(first)
	slices.Sort(steady)
	row.FirstRequests, row.SteadyRequests = len(first), len(steady)
	row.FirstP50, row.FirstP99, row.FirstMax = pct(first, 0.5), pct(first, 0.99), pct(first, 1)
	row.SteadyP50, row.SteadyP99, row.SteadyMax = pct(steady, 0.5), pct(steady, 0.99), pct(steady, 1)
	if row.SteadyP99 > 0 {
		row.FirstToSteady = row.FirstP99 / row.SteadyP99
	}
	row.BatchTFLOP = float64(batchDone.Load()) * batch.flops / el / 1e12
	return row, nil
}

// writeColdReport prints the medians over rounds per variant and the
// must-show checks.
func writeColdReport(out io.Writer, rows []ColdRow, c coldCfg) {
	med := func(v string, f func(ColdRow) float64) float64 {
		return medianOf(rows, func(r ColdRow) bool { return r.Variant == v }, f)
	}
	worst := func(v string, f func(ColdRow) float64) float64 {
		w := 0.0
		for _, r := range rows {
			if r.Variant == v {
				w = max(w, f(r))
			}
		}
		return w
	}
	fmt.Fprintf(out, "\n### Cold start: 16 request goroutines on a fresh tenant, first %v against steady (medians over rounds; max: the worst round)\n", c.first)
	if len(rows) > 0 && rows[0].Simulated {
		fmt.Fprintln(out, "\nSimulated: the fake driver's timings, not a GPU's (it makes contexts and loads nothing at no cost): the figures show the machinery runs, not what it achieves.")
	}
	fmt.Fprintln(out, "\n| variant | NewTenant ms | first P50 us | first P99 us | first max us | steady P50 us | steady P99 us | first/steady P99 | batch TFLOP/s |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
	for _, v := range c.variants {
		fmt.Fprintf(out, "| %s | %.1f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2fx | %.1f |\n", v,
			med(v, func(r ColdRow) float64 { return r.NewTenantMs }), med(v, func(r ColdRow) float64 { return r.FirstP50 }),
			med(v, func(r ColdRow) float64 { return r.FirstP99 }), worst(v, func(r ColdRow) float64 { return r.FirstMax }),
			med(v, func(r ColdRow) float64 { return r.SteadyP50 }), med(v, func(r ColdRow) float64 { return r.SteadyP99 }),
			med(v, func(r ColdRow) float64 { return r.FirstToSteady }), med(v, func(r ColdRow) float64 { return r.BatchTFLOP }))
	}
	if !slices.Contains(c.variants, "warmup") {
		return
	}
	fmt.Fprintln(out, "\nChecks (WithWarmup and no DoEach; performance: reported, not fatal):")
	judged := len(rows) == 0 || !rows[0].Simulated
	check := func(ok bool, name, got string) { printCheck(out, Check{Name: name, Pass: ok, Got: got}, judged) }
	ratio := med("warmup", func(r ColdRow) float64 { return r.FirstToSteady })
	check(ratio > 0 && ratio <= 2, fmt.Sprintf("warmup: P99 over the first %v <= 2x the steady P99", c.first), fmt.Sprintf("%.2fx (%.0f against %.0f us)",
		ratio, med("warmup", func(r ColdRow) float64 { return r.FirstP99 }), med("warmup", func(r ColdRow) float64 { return r.SteadyP99 })))
	m := worst("warmup", func(r ColdRow) float64 { return r.FirstMax })
	check(m > 0 && m <= 5000, fmt.Sprintf("warmup: no request over 5 ms in the first %v (every round)", c.first), fmt.Sprintf("max %.0f us", m))
}
