package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// The bursty load: the interactive class alternates -burst's
// quiet phase (one request goroutine) and its burst phase (sixteen), the
// batch class runs throughout, and each layout is a way to split the GPU:
// split16, split32 and split48 (the interactive class on that many SMs,
// the batch on the rest), steer (fcsp.WithLatencyTarget(-target, 16, 48):
// the pool's controller moves the SMs; the batch's queue bounded by the
// default horizon while it may), steer-nobound (the same without the
// bound: fcsp.WithQueueHorizon(fcsp.NoQueueHorizon)), steer-rel
// (fcsp.WithRelativeLatencyTarget(-target-relative, 16, 48): the pool
// measures the reference), steer-r48 (steer with -target-relative times
// the round's split48 burst P99 as its target: the storm measures it),
// steer-idle
// and steer-idle-nobound (steer and steer-nobound whose interactive class
// sends nothing: the batch alone, with and without the bound) and mps
// (each class a process on the plain device under NVIDIA MPS,
// -mps-inter-pct / -mps-batch-pct of its threads, 12% / 88% by default).
// Rounds interleave the layouts. Per layout: the P50/P99/max of the
// requests that started in quiet and in burst phases, the batch's mean
// TFLOP/s and its GEMM's time, both classes' SMs over time, the
// interactive P99 over time, per burst the time from its first request
// until its P99 is back within a target (reaction.go), and per move of the
// controller what it took and how long its growth waited for the batch's
// queued work. -chart draws the first round's SMs, P99, recoveries and
// moves over time as an SVG file.
//
//	storm -burst 3s/1s -cycles 4 [-burst-layouts split16,split48,steer,steer-nobound,steer-rel,steer-idle,steer-idle-nobound,mps] [-target 300us] [-chart burst.svg]
//	storm -burst 300ms/100ms -cycles 10 ...   # the fast variant

// burstLayoutNames are -burst-layouts' names; the first four are its
// default.
var burstLayoutNames = []string{"split16", "split32", "split48", "steer", "mps", "steer-nobound", "steer-rel", "steer-r48", "steer-idle", "steer-idle-nobound", "split40"}

// steered reports whether the pool's controller moves layout's SMs.
func steered(layout string) bool { return strings.HasPrefix(layout, "steer") }

// idle reports whether layout's interactive class sends no request.
func idle(layout string) bool { return strings.HasPrefix(layout, "steer-idle") }

// BurstRow is one layout's figures in one round.
type BurstRow struct {
	Round      int     `json:"round"`
	Layout     string  `json:"layout"`
	Work       string  `json:"work"`
	Simulated  bool    `json:"simulated,omitempty"`
	QuietP50   float64 `json:"quiet_p50_us"`
	QuietP99   float64 `json:"quiet_p99_us"`
	QuietMax   float64 `json:"quiet_max_us"`
	BurstP50   float64 `json:"burst_p50_us"`
	BurstP99   float64 `json:"burst_p99_us"`
	BurstMax   float64 `json:"burst_max_us"`
	Requests   int     `json:"requests"`
	BatchTFLOP float64 `json:"batch_tflops"`
	// The batch's rate in each phase (GEMM pairs counted where they end;
	// in-process layouts only): where a controller's batch figure is lost.
	BatchQuietTFLOP float64           `json:"batch_quiet_tflops,omitempty"`
	BatchBurstTFLOP float64           `json:"batch_burst_tflops,omitempty"`
	RecoveryMs      []float64         `json:"recovery_ms"` // per burst, from its first request to the first 10 ms window within -target; -1: never within the burst
	Moves           uint64            `json:"sm_moves"`
	MovesBy         fcsp.SMMoveCounts `json:"sm_moves_by"` // by the rule that made each
	// The SMs over time, [ms since the first phase, SMs], each class's,
	// at each change (none under MPS, which splits threads, not SMs), and
	// the interactive P99 over time, [ms, µs], per window of P99WindowMs.
	SMs         [][2]int     `json:"sms_over_time"`
	BatchSMs    [][2]int     `json:"batch_sms_over_time,omitempty"`
	P99         [][2]float64 `json:"p99_over_time"`
	P99WindowMs float64      `json:"p99_window_ms"`

	// Reaction, computed once every layout ran (the target may be
	// split48's). Per burst: its first request (ms since the first phase;
	// -1: none), the time from it until the P99 of the burst's requests
	// since then is back within RecoveryTargetUs for good
	// (recoverySinceFirst), and until the first 10 ms window of them
	// within it; -1: never.
	BurstFirstMs []float64 `json:"burst_first_ms"`
	// BurstHeadP99 is the P99 of the requests that started in the first
	// headWindow of their burst, every burst's together: the burst's part
	// a growth's hand-over serves.
	BurstHeadP99         float64   `json:"burst_head_p99_us,omitempty"`
	RecoveryTargetUs     float64   `json:"recovery_target_us"`
	RecoverySinceFirstMs []float64 `json:"recovery_since_first_ms"`
	RecoveryWindowMs     []float64 `json:"recovery_window_ms"`
	// The controller's moves decided in the measured window (the pool's
	// debug lines), and at the cell's end its own histograms and target
	// (Stats.SMMoveTime, BurstRecovery, LatencyTarget).
	MoveLog         []MoveRow `json:"move_log,omitempty"`
	SMMoveTime      *HistRow  `json:"sdk_sm_move_time,omitempty"`
	SDKRecovery     *HistRow  `json:"sdk_burst_recovery,omitempty"`
	LatencyTargetUs float64   `json:"latency_target_us,omitempty"`
	// The batch's GEMM time: its FLOPs over its rate (a GEMM's time were
	// its GEMMs run one after another, as its bound runs them), and a
	// worker's GEMM pair's time per GEMM on its stream (with its other
	// workers' side by side, and the waits in admission).
	BatchGEMMms       float64 `json:"batch_gemm_ms,omitempty"`
	BatchStreamGEMMms float64 `json:"batch_stream_gemm_ms,omitempty"`

	reqs   []reqRec  // the burst phases' requests, sorted by start, until the recoveries are computed
	origin time.Time // the first phase's start
}

type burstCfg struct {
	quiet, burst time.Duration
	cycles       int
	layouts      []string
	target       time.Duration
	batchK       int
	chart        string        // -chart: the SVG file
	relFactor    float64       // -target-relative
	split48x     float64       // -target-split48: steer's target as that factor of the round's split48 burst P99; 0: -target
	idle         bool          // the interactive class sends nothing (steer-idle)
	horizon      time.Duration // -queue-horizon: the bounded layouts' horizon; 0: the SDK's default
}

// fast says whether the load is the short variant (bursts under half a
// second), whose must-show bounds are looser.
func (b burstCfg) fast() bool { return b.burst < 500*time.Millisecond }

// estimate is -burst's wall time, roughly: each cell's warm-up and cycles,
// 2.5 s more for its pool, tenants and workers (16 cuBLAS handles, every
// context of every size warmed) and 5 s more under MPS (two processes
// that load cuBLAS, the daemon started and stopped).
func (b burstCfg) estimate(warmup time.Duration, rounds int) time.Duration {
	var d time.Duration
	for _, l := range b.layouts {
		d += warmup + time.Duration(b.cycles)*b.period() + 2500*time.Millisecond
		if l == "mps" {
			d += 5 * time.Second
		}
	}
	return d * time.Duration(rounds)
}

func (b burstCfg) period() time.Duration { return b.quiet + b.burst }

// p99Window is the width of the P99-over-time windows: a tenth of a burst,
// 5 to 100 ms.
func (b burstCfg) p99Window() time.Duration {
	return min(max(b.burst/10, 5*time.Millisecond), 100*time.Millisecond)
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
func runBursts(ctx context.Context, op *opener, cfg config, haveCublas bool, out io.Writer) ([]BurstRow, *BurstReport, error) {
	b := cfg.bursts
	tgt := b.target.String()
	if b.split48x > 0 {
		tgt = fmt.Sprintf("%gx split48's burst P99", b.split48x)
	}
	hz := "the default"
	if b.horizon > 0 {
		hz = b.horizon.String()
	}
	fmt.Fprintf(out, "storm -burst: %v quiet (1 request goroutine), %v burst (16), %d cycles per cell, layouts %s, target %s (relative: %gx), queue horizon %s, %d round(s): about %v\n",
		b.quiet, b.burst, b.cycles, strings.Join(b.layouts, ","), tgt, b.relFactor, hz, cfg.rounds, b.estimate(cfg.warmup, cfg.rounds).Round(time.Second))
	start := time.Now()
	var rows []BurstRow
	for round := 1; round <= cfg.rounds; round++ {
		var p48 time.Duration // this round's split48 burst P99, once it ran
		for _, l := range b.layouts {
			var r BurstRow
			var err error
			if l == "mps" {
				r, err = runBurstMPS(ctx, cfg, round)
			} else {
				r, err = runBurstLayout(ctx, op, cfg, haveCublas, l, round, p48)
			}
			if l == "split48" && err == nil {
				p48 = time.Duration(r.BurstP99 * 1e3)
			}
			if err != nil {
				return rows, nil, fmt.Errorf("round %d, %s: %w", round, l, err)
			}
			gemm := ""
			if r.BatchGEMMms > 0 {
				gemm = fmt.Sprintf(" (a GEMM %.2f ms)", r.BatchGEMMms)
			}
			line := fmt.Sprintf("round %d %-18s quiet P50/P99/max %.0f/%.0f/%.0f us, burst %.0f/%.0f/%.0f us, batch %.1f TFLOP/s%s, recovery %v ms, %d moves (grow on load %d, on P99 %d, shrink %d, trim %d)",
				round, l, r.QuietP50, r.QuietP99, r.QuietMax, r.BurstP50, r.BurstP99, r.BurstMax, r.BatchTFLOP, gemm, r.RecoveryMs, r.Moves,
				r.MovesBy.GrowLoad, r.MovesBy.GrowP99, r.MovesBy.Shrink, r.MovesBy.Trim)
			if w := growthWaits(r.MoveLog); len(w) > 0 {
				line += fmt.Sprintf(", growths' wait for queued work max %.2f ms", slices.Max(w))
			}
			fmt.Fprintf(out, "%s [%s]\n", line, r.Work)
			rows = append(rows, r)
		}
	}
	rep := finishBursts(rows, b)
	rep.WallSeconds = time.Since(start).Seconds()
	writeBurstReport(out, rows, rep, b)
	if b.chart != "" {
		if err := writeBurstChart(b.chart, rows, b); err != nil {
			return rows, rep, fmt.Errorf("-chart: %w", err)
		}
		fmt.Fprintf(out, "chart (round 1: SMs per class, interactive P99, each burst's recovery and each move over time): %s\n", b.chart)
	}
	return rows, rep, nil
}

// layoutTarget is the target a steered layout states: steer-r48's
// -target-relative times the round's split48 burst P99 (p48), steer's
// -target-split48 times it where set, else -target. The target a server
// derives from a split it measured on the card at hand.
func (b burstCfg) layoutTarget(layout string, p48 time.Duration) (time.Duration, error) {
	f := b.split48x
	if layout == "steer-r48" {
		f = b.relFactor
	}
	if f == 0 || layout == "steer-rel" {
		return b.target, nil
	}
	if p48 <= 0 {
		return 0, fmt.Errorf("%w: %s's target is %gx split48's burst P99: run split48 before it in -burst-layouts", ErrBadValue, layout, f)
	}
	return time.Duration(f * float64(p48)).Round(time.Microsecond), nil
}

// runBurstLayout runs one in-process layout on a pool of its own; p48 is
// the round's split48 burst P99 (0: not run yet), which a derived target
// is a factor of (layoutTarget).
func runBurstLayout(ctx context.Context, op *opener, cfg config, haveCublas bool, layout string, round int, p48 time.Duration) (row BurstRow, err error) {
	b := cfg.bursts
	b.idle = idle(layout)
	if steered(layout) {
		if b.target, err = b.layoutTarget(layout, p48); err != nil {
			return row, err
		}
	}
	tap := newMoveTap("interactive")
	op.tap = tap.wrap
	pool, err := op.open(ctx)
	op.tap = nil
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, pool.Close()) }()
	wk := workFor(pool, haveCublas)
	var opt fcsp.TenantOption
	restOpts := []fcsp.TenantOption{fcsp.WithRestOfSMs()}
	horizon := b.horizon // the rest's queue bound where steered; 0: the SDK's default
	switch layout {
	case "split16":
		opt = fcsp.WithSMs(16)
	case "split32":
		opt = fcsp.WithSMs(32)
	case "split40":
		opt = fcsp.WithSMs(40)
	case "split48":
		opt = fcsp.WithSMs(48)
	case "steer", "steer-idle", "steer-r48":
		opt = fcsp.WithLatencyTarget(b.target, 16, 48)
	case "steer-nobound", "steer-idle-nobound":
		opt = fcsp.WithLatencyTarget(b.target, 16, 48)
		horizon = fcsp.NoQueueHorizon
	case "steer-rel":
		opt = fcsp.WithRelativeLatencyTarget(b.relFactor, 16, 48)
	}
	if horizon != 0 && steered(layout) {
		restOpts = append(restOpts, fcsp.WithQueueHorizon(horizon))
	}
	it, err := pool.NewTenant("interactive", opt)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	bt, err := pool.NewTenant("batch", restOpts...)
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
	row, err = burstLoad(ctx, b, cfg.warmup, inter, batch, nil)
	row.Round, row.Layout, row.Work, row.Simulated = round, layout, wk.String(), pool.Device().Simulated
	if steered(layout) {
		st := it.Stats()
		row.SMMoveTime, row.SDKRecovery = histRow(st.SMMoveTime), histRow(st.BurstRecovery)
		row.LatencyTargetUs = float64(st.LatencyTarget.Nanoseconds()) / 1e3
		row.MoveLog = tap.rows(row.origin, row.origin.Add(time.Duration(b.cycles)*b.period()))
	}
	return row, err
}

// burstLoad runs the bursty load on the classes given (under MPS a
// process has one: batch is nil in the interactive one) for -cycles
// periods after warmup, calling atOrigin (if not nil) when the first
// phase starts, and measures.
func burstLoad(ctx context.Context, b burstCfg, warmup time.Duration, inter, batch *class, atOrigin func()) (row BurstRow, err error) {
	period := b.period()
	origin := time.Now().Add(warmup)
	end := origin.Add(time.Duration(b.cycles) * period)
	inBurst := func(t time.Time) bool {
		return !t.Before(origin) && t.Sub(origin)%period >= b.quiet
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(e error) {
		mu.Lock()
		errs = append(errs, e)
		mu.Unlock()
	}
	if atOrigin != nil {
		wg.Go(func() { time.Sleep(time.Until(origin)); atOrigin() })
	}
	var batchDone, batchInBurst, pairNs, pairs atomic.Int64
	if batch != nil {
		for _, w := range batch.workers {
			wg.Go(func() {
				for time.Now().Before(end) {
					t0 := time.Now()
					if e := errors.Join(w.Run(ctx), w.Run(ctx), w.Stream().Synchronize()); e != nil {
						fail(e)
						return
					}
					if now := time.Now(); now.After(origin) && now.Before(end) {
						batchDone.Add(2)
						if inBurst(now) {
							batchInBurst.Add(2)
						}
						if !t0.Before(origin) {
							pairNs.Add(int64(now.Sub(t0)))
							pairs.Add(1)
						}
					}
				}
			})
		}
	}
	// Each class's SMs: where they start, then as goroutine 0 (which
	// requests in every phase) finds them after each of its requests, a
	// change point each time they moved. MPS splits threads, not SMs:
	// nothing to follow.
	track := inter.t.Stats().Partitioned
	smsNow := func() (int, int) {
		if batch == nil {
			return inter.t.SMs(), 0
		}
		return inter.t.SMs(), batch.t.SMs()
	}
	if track { // where they start (the requests report the moves)
		si, sb := smsNow()
		row.SMs = [][2]int{{0, si}}
		if batch != nil {
			row.BatchSMs = [][2]int{{0, sb}}
		}
	}
	lats := make([][]sample, 16)
	workers := inter.workers[:16]
	if b.idle {
		workers = nil
	}
	for i, w := range workers {
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
				t1 := time.Now()
				lats[i] = append(lats[i], sample{t0, float64(t1.Sub(t0).Nanoseconds()) / 1e3})
				if i == 0 && track && !t1.Before(origin) {
					ms := int(t1.Sub(origin).Milliseconds())
					si, sb := smsNow()
					if n := len(row.SMs); n == 0 || row.SMs[n-1][1] != si || (batch != nil && row.BatchSMs[n-1][1] != sb) {
						row.SMs = append(row.SMs, [2]int{ms, si})
						if batch != nil {
							row.BatchSMs = append(row.BatchSMs, [2]int{ms, sb})
						}
					}
				}
			}
		})
	}
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
				row.reqs = append(row.reqs, reqRec{s.start.Sub(origin), s.us})
			} else {
				quiet = append(quiet, s.us)
			}
		}
	}
	slices.SortFunc(row.reqs, func(x, y reqRec) int { return cmp.Compare(x.at, y.at) })
	row.origin = origin
	slices.Sort(quiet)
	slices.Sort(burst)
	row.Requests = len(quiet) + len(burst)
	row.QuietP50, row.QuietP99, row.QuietMax = pct(quiet, 0.5), pct(quiet, 0.99), pct(quiet, 1)
	row.BurstP50, row.BurstP99, row.BurstMax = pct(burst, 0.5), pct(burst, 0.99), pct(burst, 1)
	if batch != nil {
		row.BatchTFLOP = float64(batchDone.Load()) * batch.flops / end.Sub(origin).Seconds() / 1e12
		inB := batchInBurst.Load()
		n := float64(b.cycles)
		row.BatchQuietTFLOP = float64(batchDone.Load()-inB) * batch.flops / (n * b.quiet.Seconds()) / 1e12
		row.BatchBurstTFLOP = float64(inB) * batch.flops / (n * b.burst.Seconds()) / 1e12
		if row.BatchTFLOP > 0 {
			row.BatchGEMMms = batch.flops / (row.BatchTFLOP * 1e12) * 1e3
		}
		if p := pairs.Load(); p > 0 {
			row.BatchStreamGEMMms = float64(pairNs.Load()) / float64(p) / 2 / 1e6
		}
	}
	slices.SortFunc(all, func(x, y sample) int { return x.start.Compare(y.start) })
	for c := range b.cycles {
		r := burstReqs(row.reqs, b, c)
		row.RecoveryMs = append(row.RecoveryMs, recoveryWindow(r, time.Duration(c+1)*period, float64(b.target.Nanoseconds())/1e3))
	}
	row.P99, row.P99WindowMs = p99Series(all, origin, end, b.p99Window())
	st := inter.t.Stats()
	row.Moves, row.MovesBy = st.SMMoves, st.SMMovesBy
	if n := len(row.SMs); n > 0 { // the last change holds to the end
		last := int(end.Sub(origin).Milliseconds())
		row.SMs = append(row.SMs, [2]int{last, row.SMs[n-1][1]})
		if batch != nil {
			row.BatchSMs = append(row.BatchSMs, [2]int{last, row.BatchSMs[n-1][1]})
		}
	}
	return row, nil
}

// p99Series is the P99 of the requests that started in each window of w
// from origin to end, sorted by start ([window start ms, µs]); a window
// without requests is left out.
func p99Series(sorted []sample, origin, end time.Time, w time.Duration) ([][2]float64, float64) {
	var out [][2]float64
	i := 0
	var win []float64
	for from := origin; from.Before(end); from = from.Add(w) {
		to := from.Add(w)
		win = win[:0]
		for ; i < len(sorted) && sorted[i].start.Before(to); i++ {
			if !sorted[i].start.Before(from) {
				win = append(win, sorted[i].us)
			}
		}
		if len(win) > 0 {
			slices.Sort(win)
			out = append(out, [2]float64{float64(from.Sub(origin).Milliseconds()), pct(win, 0.99)})
		}
	}
	return out, float64(w.Microseconds()) / 1e3
}

// burstLogEnv names the file where the mps layout's interactive process
// writes its burst phases' requests (writeReqs), for the parent to compute
// their recoveries once every layout ran.
const burstLogEnv = "STORM_BURST_LOG"

// runBurstRole is the interactive process of the mps layout: its class
// on the plain device, the bursty load, "measure" on stdout when the
// first phase starts (the parent then starts the batch process's count),
// its requests to the file $STORM_BURST_LOG names, and the row as the
// last line.
func runBurstRole(ctx context.Context, cfg config, out, errw io.Writer) error {
	pool, wk, err := openRole(ctx, cfg, errw)
	if err != nil {
		return err
	}
	defer pool.Close()
	t, err := pool.NewTenant("mps-interactive")
	if err != nil {
		return err
	}
	defer t.Close()
	cl, err := newClass(ctx, "interactive", t, false, 16, wk)
	if err != nil {
		return err
	}
	defer cl.close(ctx)
	row, err := burstLoad(ctx, cfg.bursts, cfg.warmup, cl, nil, func() { fmt.Fprintln(out, "measure") })
	if err != nil {
		return err
	}
	row.Layout, row.Work, row.Simulated = "mps", wk.String(), pool.Device().Simulated
	if path := os.Getenv(burstLogEnv); path != "" {
		if err := writeReqs(path, row.reqs); err != nil {
			return err
		}
	}
	js, err := json.Marshal(roleResult{Role: "interactive", Burst: &row})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, string(js))
	return nil
}

// runBurstMPS runs the mps layout of one round: the batch process first
// (at -mps-batch-pct, counting its GEMMs from "start" to the end of its
// input), then the interactive one (at -mps-inter-pct) with the bursty
// load; the batch's count starts when the interactive's first phase does.
func runBurstMPS(ctx context.Context, cfg config, round int) (row BurstRow, err error) {
	b := cfg.bursts
	exe, err := os.Executable()
	if err != nil {
		return row, err
	}
	stop, err := startMPS(ctx, cfg)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, stop()) }()
	common := []string{"-k", "1", "-storm", "none", "-probe-every", "0", "-maxconn=false", "-wait", cfg.wait,
		"-heap", strconv.Itoa(cfg.heapMiB), "-warmup", cfg.warmup.String()}
	if cfg.cublas != "" {
		common = append(common, "-cublas", cfg.cublas)
	}
	if cfg.simulate {
		common = append(common, "-simulate")
	}
	var kids []*child
	defer func() { killAll(kids) }() // on an error, nobody is left running
	pct := func(p int) string { return "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + strconv.Itoa(p) }
	bp, err := startChild(ctx, exe, "batch", append(slices.Clone(common), "-batch-k", strconv.Itoa(b.batchK)), pct(cfg.mpsBatch))
	if err != nil {
		return row, err
	}
	kids = append(kids, bp)
	if !bp.until("ready") {
		return row, bp.finish()
	}
	reqLog, err := os.CreateTemp("", "storm-burst-*.bin")
	if err != nil {
		return row, err
	}
	reqLog.Close()
	defer os.Remove(reqLog.Name())
	ip, err := startChild(ctx, exe, "interactive", append(slices.Clone(common), "-burst", b.quiet.String()+"/"+b.burst.String(),
		"-cycles", strconv.Itoa(b.cycles), "-target", b.target.String()), pct(cfg.mpsInter), burstLogEnv+"="+reqLog.Name())
	if err != nil {
		return row, err
	}
	kids = append(kids, ip)
	if ip.until("measure") {
		fmt.Fprintln(bp.stdin, "start")
	}
	if err := errors.Join(ip.finish(), bp.finish()); err != nil {
		return row, err
	}
	if ip.result.Burst == nil {
		return row, errors.New("the interactive process gave no burst row")
	}
	row = *ip.result.Burst
	row.Round, row.BatchTFLOP = round, bp.result.Cell.BatchTFLOPs
	row.reqs, err = readReqs(reqLog.Name())
	return row, err
}
