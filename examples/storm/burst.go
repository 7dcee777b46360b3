package main

import (
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
// the pool's controller moves the SMs) and mps (each class a process on
// the plain device under NVIDIA MPS, -mps-inter-pct / -mps-batch-pct of
// its threads, 12% / 88% by default). Rounds interleave the layouts. Per
// layout: the P50/P99/max of the requests that started in quiet and in
// burst phases, the batch's mean TFLOP/s, both classes' SMs over time, the
// interactive P99 over time, and each burst's recovery (from its start to
// the first 10 ms whose P99 is within -target). -chart draws the first
// round's SMs and P99 over time as an SVG file.
//
//	storm -burst 3s/1s -cycles 4 [-burst-layouts split16,split32,split48,steer,mps] [-target 300us] [-chart burst.svg]
//	storm -burst 300ms/100ms -cycles 10 ...   # the fast variant

var burstLayoutNames = []string{"split16", "split32", "split48", "steer", "mps"}

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
	RecoveryMs      []float64         `json:"recovery_ms"` // per burst; -1: never within the burst
	Moves           uint64            `json:"sm_moves"`
	MovesBy         fcsp.SMMoveCounts `json:"sm_moves_by"` // by the rule that made each
	// The SMs over time, [ms since the first phase, SMs], each class's,
	// at each change (none under MPS, which splits threads, not SMs), and
	// the interactive P99 over time, [ms, µs], per window of P99WindowMs.
	SMs         [][2]int     `json:"sms_over_time"`
	BatchSMs    [][2]int     `json:"batch_sms_over_time,omitempty"`
	P99         [][2]float64 `json:"p99_over_time"`
	P99WindowMs float64      `json:"p99_window_ms"`
}

type burstCfg struct {
	quiet, burst time.Duration
	cycles       int
	layouts      []string
	target       time.Duration
	batchK       int
	chart        string // -chart: the SVG file
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
func runBursts(ctx context.Context, op *opener, cfg config, haveCublas bool, out io.Writer) ([]BurstRow, error) {
	b := cfg.bursts
	fmt.Fprintf(out, "storm -burst: %v quiet (1 request goroutine), %v burst (16), %d cycles per cell, layouts %s, target %v, %d round(s)\n",
		b.quiet, b.burst, b.cycles, strings.Join(b.layouts, ","), b.target, cfg.rounds)
	var rows []BurstRow
	for round := 1; round <= cfg.rounds; round++ {
		for _, l := range b.layouts {
			var r BurstRow
			var err error
			if l == "mps" {
				r, err = runBurstMPS(ctx, cfg, round)
			} else {
				r, err = runBurstLayout(ctx, op, cfg, haveCublas, l, round)
			}
			if err != nil {
				return rows, fmt.Errorf("round %d, %s: %w", round, l, err)
			}
			fmt.Fprintf(out, "round %d %-8s quiet P50/P99/max %.0f/%.0f/%.0f us, burst %.0f/%.0f/%.0f us, batch %.1f TFLOP/s, recovery %v ms, %d moves (grow on load %d, on P99 %d, shrink %d, trim %d) [%s]\n",
				round, l, r.QuietP50, r.QuietP99, r.QuietMax, r.BurstP50, r.BurstP99, r.BurstMax, r.BatchTFLOP, r.RecoveryMs, r.Moves,
				r.MovesBy.GrowLoad, r.MovesBy.GrowP99, r.MovesBy.Shrink, r.MovesBy.Trim, r.Work)
			rows = append(rows, r)
		}
	}
	writeBurstReport(out, rows, b)
	if b.chart != "" {
		if err := writeBurstChart(b.chart, rows, b); err != nil {
			return rows, fmt.Errorf("-chart: %w", err)
		}
		fmt.Fprintf(out, "chart (round 1: SMs per class and interactive P99 over time): %s\n", b.chart)
	}
	return rows, nil
}

// runBurstLayout runs one in-process layout on a pool of its own.
func runBurstLayout(ctx context.Context, op *opener, cfg config, haveCublas bool, layout string, round int) (row BurstRow, err error) {
	b := cfg.bursts
	pool, err := op.open(ctx)
	if err != nil {
		return row, err
	}
	defer func() { err = errors.Join(err, pool.Close()) }()
	wk := workFor(pool, haveCublas)
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
	row, err = burstLoad(ctx, b, cfg.warmup, inter, batch, nil)
	row.Round, row.Layout, row.Work, row.Simulated = round, layout, wk.String(), pool.Device().Simulated
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
	var batchDone, batchInBurst atomic.Int64
	if batch != nil {
		for _, w := range batch.workers {
			wg.Go(func() {
				for time.Now().Before(end) {
					if e := errors.Join(w.Run(ctx), w.Run(ctx), w.Stream().Synchronize()); e != nil {
						fail(e)
						return
					}
					if now := time.Now(); now.After(origin) && now.Before(end) {
						batchDone.Add(2)
						if inBurst(now) {
							batchInBurst.Add(2)
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
	for i, w := range inter.workers[:16] {
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
	if batch != nil {
		row.BatchTFLOP = float64(batchDone.Load()) * batch.flops / end.Sub(origin).Seconds() / 1e12
		inB := batchInBurst.Load()
		n := float64(b.cycles)
		row.BatchQuietTFLOP = float64(batchDone.Load()-inB) * batch.flops / (n * b.quiet.Seconds()) / 1e12
		row.BatchBurstTFLOP = float64(inB) * batch.flops / (n * b.burst.Seconds()) / 1e12
	}
	slices.SortFunc(all, func(x, y sample) int { return x.start.Compare(y.start) })
	row.RecoveryMs = recoveries(all, origin, b)
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

// recoveries is, per burst, the time from its start to the start of the
// first 10 ms window whose requests' P99 is within target (-1: none). all
// is sorted by start.
func recoveries(all []sample, origin time.Time, b burstCfg) []float64 {
	period := b.period()
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

// runBurstRole is the interactive process of the mps layout: its class
// on the plain device, the bursty load, "measure" on stdout when the
// first phase starts (the parent then starts the batch process's count),
// and the row as the last line.
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
	ip, err := startChild(ctx, exe, "interactive", append(slices.Clone(common), "-burst", b.quiet.String()+"/"+b.burst.String(),
		"-cycles", strconv.Itoa(b.cycles), "-target", b.target.String()), pct(cfg.mpsInter))
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
	return row, nil
}

// writeBurstReport prints the medians over rounds per layout and the
// checks, the controller against the static splits of the same
// run.
func writeBurstReport(out io.Writer, rows []BurstRow, b burstCfg) {
	med := func(l string, f func(BurstRow) float64) float64 {
		return medianOf(rows, func(r BurstRow) bool { return r.Layout == l }, f)
	}
	fmt.Fprintln(out, "\n### Bursty interactive class beside the batch class (medians over rounds)")
	if len(rows) > 0 && rows[0].Simulated {
		fmt.Fprintln(out, "\nSimulated: the fake driver's timings, not a GPU's; the figures show the machinery runs, not what it achieves.")
	}
	fmt.Fprintln(out, "\n| layout | quiet P50 us | quiet P99 us | quiet max us | burst P50 us | burst P99 us | burst max us | batch TFLOP/s | batch quiet / burst | worst recovery ms | moves |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|")
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
		phases := "-"
		if q := med(l, func(r BurstRow) float64 { return r.BatchQuietTFLOP }); q > 0 {
			phases = fmt.Sprintf("%.1f / %.1f", q, med(l, func(r BurstRow) float64 { return r.BatchBurstTFLOP }))
		}
		fmt.Fprintf(out, "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %s | %s | %.0f |\n", l,
			med(l, func(r BurstRow) float64 { return r.QuietP50 }), med(l, func(r BurstRow) float64 { return r.QuietP99 }),
			med(l, func(r BurstRow) float64 { return r.QuietMax }), med(l, func(r BurstRow) float64 { return r.BurstP50 }),
			med(l, func(r BurstRow) float64 { return r.BurstP99 }), med(l, func(r BurstRow) float64 { return r.BurstMax }),
			med(l, func(r BurstRow) float64 { return r.BatchTFLOP }), phases, recoveryText(worst), med(l, func(r BurstRow) float64 { return float64(r.Moves) }))
	}
	if !slices.Contains(b.layouts, "steer") {
		return
	}
	fmt.Fprintln(out, "\nChecks (this run's medians; performance: reported, not fatal):")
	judged := len(rows) == 0 || !rows[0].Simulated
	check := func(ok bool, name, got string) { printCheck(out, Check{Name: name, Pass: ok, Got: got}, judged) }
	s := func(l string, f func(BurstRow) float64) float64 { return med(l, f) }
	bp99 := func(r BurstRow) float64 { return r.BurstP99 }
	qp99 := func(r BurstRow) float64 { return r.QuietP99 }
	tf := func(r BurstRow) float64 { return r.BatchTFLOP }
	if x := s("split48", bp99); x > 0 {
		check(s("steer", bp99) <= 1.2*x, "steer burst P99 <= 1.2x split48's", fmt.Sprintf("%.0f us against %.0f, %.2fx", s("steer", bp99), x, s("steer", bp99)/x))
	}
	// The controller's own promise: its target, which the trim spends
	// down to (a target 48 SMs beat by far leaves the 1.2x check above to
	// a split the controller is not trying to match).
	if x := s("steer", bp99); x > 0 {
		check(x <= float64(b.target.Microseconds()), "steer burst P99 within its target", fmt.Sprintf("%.0f us against %v", x, b.target))
	}
	// A floor for any controller: never worse than the smallest split it
	// starts from (run C2's fast variant: growing onto SMs still busy with
	// the batch's queued work gave 599 us against split16's 550).
	if x := s("split16", bp99); x > 0 {
		check(s("steer", bp99) <= x, "steer burst P99 <= split16's", fmt.Sprintf("%.0f us against %.0f, %.2fx", s("steer", bp99), x, s("steer", bp99)/x))
	}
	if x := s("split16", qp99); x > 0 {
		check(s("steer", qp99) <= 1.1*x, "steer quiet P99 <= 1.1x split16's", fmt.Sprintf("%.0f us against %.0f, %.2fx", s("steer", qp99), x, s("steer", qp99)/x))
	}
	if x := s("split16", tf); x > 0 {
		check(s("steer", tf) >= 0.9*x, "steer batch >= 90% of split16's", fmt.Sprintf("%.1f TFLOP/s against %.1f, %.1f%%", s("steer", tf), x, 100*s("steer", tf)/x))
		// What a controller that held split48's SMs through each burst and
		// split16's between would give: split16's quiet rate for the quiet
		// phases, split48's burst rate for the bursts.
		q16 := s("split16", func(r BurstRow) float64 { return r.BatchQuietTFLOP })
		b48 := s("split48", func(r BurstRow) float64 { return r.BatchBurstTFLOP })
		if q16 > 0 && b48 > 0 {
			mix := (q16*b.quiet.Seconds() + b48*b.burst.Seconds()) / b.period().Seconds()
			fmt.Fprintf(out, "  split16's quiet rate with split48's burst rate: %.1f TFLOP/s, %.1f%% of split16's; steer %.1f%% of that mix\n",
				mix, 100*mix/x, 100*s("steer", tf)/mix)
		}
	}
	if x := s("mps", bp99); x > 0 {
		check(s("steer", bp99) <= x, "steer burst P99 <= MPS 12%/88%'s", fmt.Sprintf("%.0f us against %.0f, %.2fx", s("steer", bp99), x, s("steer", bp99)/x))
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
