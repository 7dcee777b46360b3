package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// The bursty load of issue 41: the interactive class alternates -burst's
// quiet phase (one request goroutine) and its burst phase (sixteen), the
// batch class runs throughout, and each layout is a way to split the SMs:
// split16, split32 and split48 (the interactive class on that many SMs,
// the batch on the rest) and steer (fcsp.WithLatencyTarget(-target, 16,
// 48): the pool's controller moves the SMs). Rounds interleave the
// layouts. Per layout: the P50/P99/max of the requests that started in
// quiet and in burst phases, the batch's mean TFLOP/s, the interactive
// class's SMs over time, and each burst's recovery (from its start to the
// first 10 ms whose P99 is within -target).
//
//	storm -burst 3s/1s -cycles 4 [-burst-layouts split16,split32,split48,steer] [-target 300us]

var burstLayoutNames = []string{"split16", "split32", "split48", "steer"}

// BurstRow is one layout's figures in one round.
type BurstRow struct {
	Round      int       `json:"round"`
	Layout     string    `json:"layout"`
	Work       string    `json:"work"`
	QuietP50   float64   `json:"quiet_p50_us"`
	QuietP99   float64   `json:"quiet_p99_us"`
	QuietMax   float64   `json:"quiet_max_us"`
	BurstP50   float64   `json:"burst_p50_us"`
	BurstP99   float64   `json:"burst_p99_us"`
	BurstMax   float64   `json:"burst_max_us"`
	Requests   int       `json:"requests"`
	BatchTFLOP float64   `json:"batch_tflops"`
	RecoveryMs []float64 `json:"recovery_ms"` // per burst; -1: never within the burst
	Moves      uint64    `json:"sm_moves"`
	SMs        [][2]int  `json:"sms_over_time"` // [ms since the first phase, interactive SMs]
}

type burstCfg struct {
	quiet, burst time.Duration
	cycles       int
	layouts      []string
	target       time.Duration
	batchK       int
}

func parseBurst(spec string) (q, b time.Duration, err error) {
	qs, bs, ok := strings.Cut(spec, "/")
	if ok {
		if q, err = time.ParseDuration(qs); err == nil {
			b, err = time.ParseDuration(bs)
		}
	}
	if !ok || err != nil || q <= 0 || b <= 0 {
		return 0, 0, fmt.Errorf("%w: -burst %q: want quiet/burst durations, e.g. 3s/1s", ErrBadValue, spec)
	}
	return q, b, nil
}

// runBursts runs every burst layout in every round and reports.
func runBursts(ctx context.Context, op *opener, cfg config, haveCublas bool, out io.Writer) error {
	b := cfg.bursts
	fmt.Fprintf(out, "storm -burst: %v quiet (1 request goroutine), %v burst (16), %d cycles per cell, layouts %s, target %v, %d round(s)\n",
		b.quiet, b.burst, b.cycles, strings.Join(b.layouts, ","), b.target, cfg.rounds)
	var rows []BurstRow
	for round := 1; round <= cfg.rounds; round++ {
		for _, l := range b.layouts {
			r, err := runBurstLayout(ctx, op, cfg, haveCublas, l, round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, l, err)
			}
			fmt.Fprintf(out, "round %d %-8s quiet P50/P99/max %.0f/%.0f/%.0f us, burst %.0f/%.0f/%.0f us, batch %.1f TFLOP/s, recovery %v ms, %d moves\n",
				round, l, r.QuietP50, r.QuietP99, r.QuietMax, r.BurstP50, r.BurstP99, r.BurstMax, r.BatchTFLOP, r.RecoveryMs, r.Moves)
			rows = append(rows, r)
		}
	}
	writeBurstReport(out, rows, b)
	if cfg.jsonPath != "" {
		js, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(cfg.jsonPath, js, 0o644)
	}
	return nil
}

func runBurstLayout(ctx context.Context, op *opener, cfg config, haveCublas bool, layout string, round int) (row BurstRow, err error) {
	b := cfg.bursts
	row = BurstRow{Round: round, Layout: layout}
	pool, err := op.open(ctx)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, pool.Close()) }()
	wk := workKind{cublas: haveCublas && !pool.Device().Simulated}
	if !wk.cublas {
		wk = chainWork(pool.Device().Simulated)
	}
	row.Work = wk.String()
	var opt fcsp.TenantOption
	switch layout {
	case "split16":
		opt = fcsp.WithSMs(16)
	case "split32":
		opt = fcsp.WithSMs(32)
	case "split48":
		opt = fcsp.WithSMs(48)
	case "steer":
		opt = fcsp.WithLatencyTarget(b.target, 16, 48)
	}
	it, err := pool.NewTenant("interactive", opt)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	bt, err := pool.NewTenant("batch", fcsp.WithRestOfSMs())
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, bt.Close()) }()
	// Both classes' workers, every context of every size warmed (DoEach).
	inter, err := newClass(ctx, "interactive", it, false, 16, wk)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, inter.close(ctx)) }()
	batch, err := newClass(ctx, "batch", bt, true, b.batchK, wk)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, batch.close(ctx)) }()

	period := b.quiet + b.burst
	origin := time.Now().Add(cfg.warmup)
	end := origin.Add(time.Duration(b.cycles) * period)
	inBurst := func(t time.Time) bool {
		return t.After(origin) && t.Sub(origin)%period >= b.quiet
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(e error) {
		mu.Lock()
		errs = append(errs, e)
		mu.Unlock()
	}
	var batchDone atomic.Int64
	for _, w := range batch.workers {
		wg.Go(func() {
			for time.Now().Before(end) {
				if e := errors.Join(w.Run(ctx), w.Run(ctx), w.Stream().Synchronize()); e != nil {
					fail(e)
					return
				}
				if time.Now().After(origin) {
					batchDone.Add(2)
				}
			}
		})
	}
	lats := make([][]sample, 16)
	for i, w := range inter.workers {
		lats[i] = make([]sample, 0, 1<<17)
		wg.Go(func() {
			for {
				now := time.Now()
				if !now.Before(end) {
					return
				}
				if i > 0 && !inBurst(now) { // the burst's goroutines wait for the next burst
					next := origin
					if now.After(origin) {
						next = origin.Add(now.Sub(origin)/period*period + b.quiet)
					}
					time.Sleep(time.Until(next))
					continue
				}
				t0 := time.Now()
				if e := errors.Join(w.Run(ctx), w.Stream().Synchronize()); e != nil {
					fail(e)
					return
				}
				lats[i] = append(lats[i], sample{t0, float64(time.Since(t0).Nanoseconds()) / 1e3})
			}
		})
	}
	wg.Go(func() { // the interactive class's SMs over time
		for now := time.Now(); now.Before(end); now = time.Now() {
			if now.After(origin) {
				row.SMs = append(row.SMs, [2]int{int(now.Sub(origin).Milliseconds()), it.SMs()})
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	wg.Wait()
	if len(errs) > 0 {
		return row, errors.Join(errs...)
	}
	var quiet, burst []float64
	var all []sample
	for _, l := range lats {
		for _, s := range l {
			if s.start.Before(origin) {
				continue
			}
			all = append(all, s)
			if inBurst(s.start) {
				burst = append(burst, s.us)
			} else {
				quiet = append(quiet, s.us)
			}
		}
	}
	slices.Sort(quiet)
	slices.Sort(burst)
	row.Requests = len(quiet) + len(burst)
	row.QuietP50, row.QuietP99, row.QuietMax = pct(quiet, 0.5), pct(quiet, 0.99), pct(quiet, 1)
	row.BurstP50, row.BurstP99, row.BurstMax = pct(burst, 0.5), pct(burst, 0.99), pct(burst, 1)
	row.BatchTFLOP = float64(batchDone.Load()) * batch.flops / end.Sub(origin).Seconds() / 1e12
	row.RecoveryMs = recoveries(all, origin, b)
	row.Moves = it.Stats().SMMoves
	return row, nil
}

// recoveries is, per burst, the time from its start to the start of the
// first 10 ms window whose requests' P99 is within target (-1: none).
func recoveries(all []sample, origin time.Time, b burstCfg) []float64 {
	slices.SortFunc(all, func(x, y sample) int { return x.start.Compare(y.start) })
	period := b.quiet + b.burst
	var out []float64
	for c := range b.cycles {
		bs := origin.Add(time.Duration(c)*period + b.quiet)
		got := -1.0
		for off := time.Duration(0); off+10*time.Millisecond <= b.burst; off += time.Millisecond {
			from, to := bs.Add(off), bs.Add(off+10*time.Millisecond)
			var w []float64
			for _, s := range all {
				if !s.start.Before(from) && s.start.Before(to) {
					w = append(w, s.us)
				}
			}
			if len(w) < 10 {
				continue
			}
			slices.Sort(w)
			if pct(w, 0.99) <= float64(b.target.Microseconds()) {
				got = float64(off.Milliseconds())
				break
			}
		}
		out = append(out, got)
	}
	return out
}

// writeBurstReport prints the medians over rounds per layout and the
// issue's checks, the controller against the static splits of the same
// run.
func writeBurstReport(out io.Writer, rows []BurstRow, b burstCfg) {
	med := func(l string, f func(BurstRow) float64) float64 {
		var v []float64
		for _, r := range rows {
			if r.Layout == l {
				v = append(v, f(r))
			}
		}
		slices.Sort(v)
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	fmt.Fprintln(out, "\n### Bursty interactive class beside the batch class (medians over rounds)")
	fmt.Fprintln(out, "\n| layout | quiet P50 us | quiet P99 us | quiet max us | burst P50 us | burst P99 us | burst max us | batch TFLOP/s | worst recovery ms | moves |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, l := range b.layouts {
		worst := med(l, func(r BurstRow) float64 {
			w := 0.0
			for _, x := range r.RecoveryMs {
				if x < 0 {
					return -1
				}
				w = max(w, x)
			}
			return w
		})
		fmt.Fprintf(out, "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %s | %.0f |\n", l,
			med(l, func(r BurstRow) float64 { return r.QuietP50 }), med(l, func(r BurstRow) float64 { return r.QuietP99 }),
			med(l, func(r BurstRow) float64 { return r.QuietMax }), med(l, func(r BurstRow) float64 { return r.BurstP50 }),
			med(l, func(r BurstRow) float64 { return r.BurstP99 }), med(l, func(r BurstRow) float64 { return r.BurstMax }),
			med(l, func(r BurstRow) float64 { return r.BatchTFLOP }), recoveryText(worst), med(l, func(r BurstRow) float64 { return float64(r.Moves) }))
	}
	if !slices.Contains(b.layouts, "steer") {
		return
	}
	fmt.Fprintln(out, "\nChecks (issue 41, this run's medians; performance: reported, not fatal):")
	check := func(ok bool, name, got string) {
		v := "FAIL"
		if ok {
			v = "PASS"
		}
		fmt.Fprintf(out, "%s %s: %s\n", v, name, got)
	}
	s := func(l string, f func(BurstRow) float64) float64 { return med(l, f) }
	bp99 := func(r BurstRow) float64 { return r.BurstP99 }
	qp99 := func(r BurstRow) float64 { return r.QuietP99 }
	tf := func(r BurstRow) float64 { return r.BatchTFLOP }
	if x := s("split48", bp99); x > 0 {
		check(s("steer", bp99) <= 1.2*x, "steer burst P99 <= 1.2x split48's", fmt.Sprintf("%.0f us against %.0f, %.2fx", s("steer", bp99), x, s("steer", bp99)/x))
	}
	if x := s("split16", qp99); x > 0 {
		check(s("steer", qp99) <= 1.1*x, "steer quiet P99 <= 1.1x split16's", fmt.Sprintf("%.0f us against %.0f, %.2fx", s("steer", qp99), x, s("steer", qp99)/x))
	}
	if x := s("split16", tf); x > 0 {
		check(s("steer", tf) >= 0.9*x, "steer batch >= 90% of split16's", fmt.Sprintf("%.1f TFLOP/s against %.1f, %.1f%%", s("steer", tf), x, 100*s("steer", tf)/x))
	}
	worst := -1.0
	for _, r := range rows {
		if r.Layout != "steer" {
			continue
		}
		for _, x := range r.RecoveryMs {
			if x < 0 {
				worst = 1e9
			}
			worst = max(worst, x)
		}
	}
	check(worst >= 0 && worst <= 50, "steer: every burst's P99 within target within 50 ms of its start", recoveryText(worst))
}

func recoveryText(ms float64) string {
	switch {
	case ms < 0 || ms >= 1e9:
		return "never"
	}
	return fmt.Sprintf("%.0f", ms)
}
