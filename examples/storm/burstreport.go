package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// BurstReport is -burst's summary: per layout its medians over rounds
// against the splits of the same run and its reaction to the bursts, and
// the checks: the must-show list, then the others.
type BurstReport struct {
	Quiet  string `json:"quiet"`
	Burst  string `json:"burst"`
	Cycles int    `json:"cycles"`
	Rounds int    `json:"rounds"`
	// The -target, -target-relative, and the target the recoveries are
	// measured against: -target-relative times split48's burst P99 (the
	// median over rounds) where split48 ran, else -target.
	TargetUs         float64 `json:"target_us"`
	RelativeFactor   float64 `json:"relative_factor"`
	RecoveryTargetUs float64 `json:"recovery_target_us"`
	RecoveryTargetIs string  `json:"recovery_target_is"`
	// The batch class's own GEMM time in this run: the FLOPs of one over
	// its rate where it ran alone with the bound (steer-idle), else beside
	// split16.
	BatchKernelMs   float64 `json:"batch_kernel_ms"`
	BatchKernelFrom string  `json:"batch_kernel_from"`
	// Growth is the SDK's growth this binary was linked with (growth.go):
	// "at-once" for the A/B's variant, empty for the default.
	Growth      string         `json:"growth,omitempty"`
	Layouts     []BurstSummary `json:"layouts"`
	Checks      []Check        `json:"checks"`       // the must-show list
	OtherChecks []Check        `json:"other_checks"` // the controller's own promises and floors
	WallSeconds float64        `json:"wall_seconds"`
}

// BurstSummary is one layout over its rounds.
type BurstSummary struct {
	Layout     string  `json:"layout"`
	Rounds     int     `json:"rounds"`
	QuietP99   float64 `json:"quiet_p99_us"`
	BurstP99   float64 `json:"burst_p99_us"`
	BatchTFLOP float64 `json:"batch_tflops"`
	BatchGEMM  float64 `json:"batch_gemm_ms,omitempty"`
	// Medians against the same run's splits (0: that split did not run).
	BurstToSplit48 float64 `json:"burst_p99_to_split48,omitempty"`
	// The P99 of the bursts' heads (BurstRow.BurstHeadP99), against
	// split48's: what a growth's hand-over costs the class.
	HeadP99        float64 `json:"burst_head_p99_us,omitempty"`
	HeadToSplit48  float64 `json:"burst_head_p99_to_split48,omitempty"`
	QuietToSplit16 float64 `json:"quiet_p99_to_split16,omitempty"`
	BatchToSplit16 float64 `json:"batch_to_split16,omitempty"`
	// Every burst of every round (those with requests): the worst and the
	// median recovery from its first request, since it (recoverySinceFirst)
	// and by 10 ms windows, -1 for never, and how many never did.
	Bursts           int     `json:"bursts"`
	RecoveryMaxMs    float64 `json:"recovery_max_ms"`
	RecoveryMedianMs float64 `json:"recovery_median_ms"`
	RecoveryNever    int     `json:"recovery_never"`
	WindowMaxMs      float64 `json:"window_recovery_max_ms"`
	WindowMedianMs   float64 `json:"window_recovery_median_ms"`
	WindowNever      int     `json:"window_recovery_never"`
	// The latency class's growths in the measured windows (the pool's
	// log): their wait for the batch's queued work, and every move's time.
	Growths          int     `json:"growths"`
	HandoffWaitP50Ms float64 `json:"handoff_wait_p50_ms"`
	HandoffWaitP99Ms float64 `json:"handoff_wait_p99_ms"`
	HandoffWaitMaxMs float64 `json:"handoff_wait_max_ms"`
	// The largest growth's wait over the batch's kernel time at the SMs
	// it had then (the kernel time scaled by its SMs, from the batch's
	// most): a growth from 40 SMs waits for a kernel on 92, not 116.
	HandoffWaitScaledMax float64 `json:"handoff_wait_scaled_max,omitempty"`
	// The same waits by where the growth started: from the class's floor
	// (a burst's first growth, the batch on its most SMs) and from above it
	// (a regrowth after a trim, waiting for a kernel on fewer SMs).
	FromFloor       *WaitStats `json:"growths_from_floor,omitempty"`
	FromAbove       *WaitStats `json:"growths_from_above,omitempty"`
	Moves           int        `json:"moves"`
	MoveTookP50Ms   float64    `json:"move_took_p50_ms"`
	MoveTookP99Ms   float64    `json:"move_took_p99_ms"`
	SMMoveTime      *HistRow   `json:"sdk_sm_move_time,omitempty"` // Stats', summed over rounds
	SDKRecovery     *HistRow   `json:"sdk_burst_recovery,omitempty"`
	LatencyTargetUs float64    `json:"latency_target_us,omitempty"` // Stats', the median
}

// growthWaits is the latency class's growths' waits for queued work, ms.
func growthWaits(moves []MoveRow) []float64 {
	var out []float64
	for _, m := range moves {
		if m.Grows() {
			out = append(out, m.HandoffWaitMs)
		}
	}
	return out
}

// WaitStats is a set of growths' waits for queued work, ms.
type WaitStats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// waitStats summarises w; nil for none.
func waitStats(w []float64) *WaitStats {
	if len(w) == 0 {
		return nil
	}
	return &WaitStats{N: len(w), P50: sortedPct(w, 0.5), P99: sortedPct(w, 0.99), Max: slices.Max(w)}
}

func (w *WaitStats) String() string {
	if w == nil {
		return "none"
	}
	return fmt.Sprintf("%d, %.2f / %.2f / %.2f ms", w.N, w.P50, w.P99, w.Max)
}

// floorOf is the latency class's SMs at the row's start (its floor), 0
// where the row has no SM timeline.
func floorOf(r BurstRow) int {
	if len(r.SMs) == 0 {
		return 0
	}
	return r.SMs[0][1]
}

// sortedPct is the nearest-rank q-quantile of v (sorted here).
func sortedPct(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return pct(s, q)
}

// finishBursts computes the rows' recoveries, against -target-relative
// times split48's burst P99 where split48 ran (else -target), and the
// report: the summaries and the checks.
func finishBursts(rows []BurstRow, b burstCfg) *BurstReport {
	rep := &BurstReport{Quiet: b.quiet.String(), Burst: b.burst.String(), Cycles: b.cycles, TargetUs: us(b.target), RelativeFactor: b.relFactor,
		Growth: linkedGrowth()}
	med := func(l string, f func(BurstRow) float64) float64 {
		return medianOf(rows, func(r BurstRow) bool { return r.Layout == l }, f)
	}
	ran := func(l string) bool { return slices.ContainsFunc(rows, func(r BurstRow) bool { return r.Layout == l }) }
	rep.RecoveryTargetUs, rep.RecoveryTargetIs = us(b.target), "-target"
	if p := med("split48", func(r BurstRow) float64 { return r.BurstP99 }); p > 0 {
		rep.RecoveryTargetUs = b.relFactor * p
		rep.RecoveryTargetIs = fmt.Sprintf("%gx split48's burst P99 (%.0f us)", b.relFactor, p)
	}
	for i := range rows {
		r := &rows[i]
		rep.Rounds = max(rep.Rounds, r.Round)
		r.RecoveryTargetUs = rep.RecoveryTargetUs
		r.BurstFirstMs, r.RecoverySinceFirstMs, r.RecoveryWindowMs = nil, nil, nil
		if len(r.reqs) > 0 {
			var head []float64
			for c := range b.cycles {
				q := burstReqs(r.reqs, b, c)
				head = headTimes(head, q)
				if len(q) == 0 {
					r.BurstFirstMs = append(r.BurstFirstMs, -1)
					r.RecoverySinceFirstMs = append(r.RecoverySinceFirstMs, -1)
					r.RecoveryWindowMs = append(r.RecoveryWindowMs, -1)
					continue
				}
				r.BurstFirstMs = append(r.BurstFirstMs, ms(q[0].at))
				r.RecoverySinceFirstMs = append(r.RecoverySinceFirstMs, recoverySinceFirst(q, rep.RecoveryTargetUs))
				r.RecoveryWindowMs = append(r.RecoveryWindowMs, recoveryWindow(q, time.Duration(c+1)*b.period(), rep.RecoveryTargetUs))
			}
			if len(head) > 0 {
				slices.Sort(head)
				r.BurstHeadP99 = pct(head, 0.99)
			}
		}
		r.reqs = nil
	}
	for _, l := range []string{"steer-idle", "split16"} {
		if k := med(l, func(r BurstRow) float64 { return r.BatchGEMMms }); k > 0 {
			rep.BatchKernelMs, rep.BatchKernelFrom = k, l+"'s"
			break
		}
	}
	q48, q16 := med("split48", func(r BurstRow) float64 { return r.BurstP99 }), med("split16", func(r BurstRow) float64 { return r.QuietP99 })
	h48 := med("split48", func(r BurstRow) float64 { return r.BurstHeadP99 })
	tf16 := med("split16", func(r BurstRow) float64 { return r.BatchTFLOP })
	for _, l := range b.layouts {
		if !ran(l) {
			continue
		}
		s := BurstSummary{Layout: l,
			QuietP99:        med(l, func(r BurstRow) float64 { return r.QuietP99 }),
			BurstP99:        med(l, func(r BurstRow) float64 { return r.BurstP99 }),
			HeadP99:         med(l, func(r BurstRow) float64 { return r.BurstHeadP99 }),
			BatchTFLOP:      med(l, func(r BurstRow) float64 { return r.BatchTFLOP }),
			BatchGEMM:       med(l, func(r BurstRow) float64 { return r.BatchGEMMms }),
			LatencyTargetUs: med(l, func(r BurstRow) float64 { return r.LatencyTargetUs }),
		}
		ratio := func(x, base float64) float64 {
			if x <= 0 || base <= 0 {
				return 0
			}
			return x / base
		}
		s.BurstToSplit48, s.QuietToSplit16, s.BatchToSplit16 = ratio(s.BurstP99, q48), ratio(s.QuietP99, q16), ratio(s.BatchTFLOP, tf16)
		s.HeadToSplit48 = ratio(s.HeadP99, h48)
		var rec, win, waits, took, floorW, aboveW []float64
		for _, r := range rows {
			if r.Layout != l {
				continue
			}
			s.Rounds++
			for c, first := range r.BurstFirstMs {
				if first >= 0 {
					rec, win = append(rec, r.RecoverySinceFirstMs[c]), append(win, r.RecoveryWindowMs[c])
				}
			}
			waits = append(waits, growthWaits(r.MoveLog)...)
			if floor := floorOf(r); floor > 0 {
				for _, m := range r.MoveLog {
					switch {
					case !m.Grows():
					case m.From <= floor:
						floorW = append(floorW, m.HandoffWaitMs)
					default:
						aboveW = append(aboveW, m.HandoffWaitMs)
					}
				}
			}
			if len(r.SMs) > 0 && len(r.BatchSMs) > 0 && rep.BatchKernelMs > 0 {
				total := floorOf(r) + r.BatchSMs[0][1]
				most := float64(r.BatchSMs[0][1]) // the batch's SMs with the class at its least
				for _, m := range r.MoveLog {
					if m.Grows() && total > m.From {
						k := rep.BatchKernelMs * most / float64(total-m.From)
						s.HandoffWaitScaledMax = max(s.HandoffWaitScaledMax, m.HandoffWaitMs/k)
					}
				}
			}
			for _, m := range r.MoveLog {
				if m.Refused == "" {
					took = append(took, m.TookMs)
				}
			}
			s.SMMoveTime, s.SDKRecovery = s.SMMoveTime.add(r.SMMoveTime), s.SDKRecovery.add(r.SDKRecovery)
		}
		s.Bursts = len(rec)
		s.RecoveryMaxMs, s.RecoveryMedianMs, s.RecoveryNever = recoveryStats(rec)
		s.WindowMaxMs, s.WindowMedianMs, s.WindowNever = recoveryStats(win)
		if s.Growths = len(waits); len(waits) > 0 {
			s.HandoffWaitP50Ms, s.HandoffWaitP99Ms, s.HandoffWaitMaxMs = sortedPct(waits, 0.5), sortedPct(waits, 0.99), slices.Max(waits)
		}
		s.FromFloor, s.FromAbove = waitStats(floorW), waitStats(aboveW)
		if s.Moves = len(took); len(took) > 0 {
			s.MoveTookP50Ms, s.MoveTookP99Ms = sortedPct(took, 0.5), sortedPct(took, 0.99)
		}
		rep.Layouts = append(rep.Layouts, s)
	}
	rep.Checks, rep.OtherChecks = burstChecks(rows, rep, b)
	return rep
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func (r *BurstReport) layout(l string) (BurstSummary, bool) {
	for _, s := range r.Layouts {
		if s.Layout == l {
			return s, true
		}
	}
	return BurstSummary{}, false
}

// burstChecks is the must-show list (the controller, steer, against the
// same run's splits; its growths' wait; the relative target's recoveries;
// the batch alone with and without the bound) and the other checks (the
// controller's own target, its floors, MPS, the fast variant's quiet
// P99). Under a load of bursts under half a second (300 ms / 100 ms) the
// bounds are looser: burst P99 1.2x, batch 88%.
func burstChecks(rows []BurstRow, rep *BurstReport, b burstCfg) (must, other []Check) {
	add := func(to *[]Check, ok bool, name, got string) { *to = append(*to, Check{Name: name, Pass: ok, Got: got}) }
	st, haveSteer := rep.layout("steer")
	s16, have16 := rep.layout("split16")
	s48, have48 := rep.layout("split48")
	burstMax, batchMin := 1.15, 0.90
	if b.fast() {
		burstMax, batchMin = 1.2, 0.88
	}
	if haveSteer && have48 && s48.BurstP99 > 0 {
		add(&must, st.BurstToSplit48 <= burstMax, fmt.Sprintf("steer burst P99 <= %gx split48's", burstMax),
			fmt.Sprintf("%.0f us against %.0f, %.2fx", st.BurstP99, s48.BurstP99, st.BurstToSplit48))
	}
	if haveSteer && have16 && s16.QuietP99 > 0 {
		to := &must
		if b.fast() {
			to = &other // the must-show asks it of the 3 s / 1 s load
		}
		add(to, st.QuietToSplit16 <= 1.1, "steer quiet P99 <= 1.1x split16's", fmt.Sprintf("%.0f us against %.0f, %.2fx", st.QuietP99, s16.QuietP99, st.QuietToSplit16))
	}
	if haveSteer && have16 && s16.BatchTFLOP > 0 {
		add(&must, st.BatchToSplit16 >= batchMin, fmt.Sprintf("steer batch >= %.0f%% of split16's", 100*batchMin),
			fmt.Sprintf("%.1f TFLOP/s against %.1f, %.1f%%", st.BatchTFLOP, s16.BatchTFLOP, 100*st.BatchToSplit16))
	}
	if haveSteer {
		got := fmt.Sprintf("no growth of the interactive class measured in %d round(s)", st.Rounds)
		ok := false
		if st.Growths > 0 {
			got = fmt.Sprintf("P99 %.2f ms (median %.2f, max %.2f) over %d growths", st.HandoffWaitP99Ms, st.HandoffWaitP50Ms, st.HandoffWaitMaxMs, st.Growths)
			if rep.BatchKernelMs > 0 {
				ok = st.HandoffWaitP99Ms <= rep.BatchKernelMs
				got += fmt.Sprintf(" against %.2f ms (%s GEMM: its FLOPs over its rate), %.2fx", rep.BatchKernelMs, rep.BatchKernelFrom, st.HandoffWaitP99Ms/rep.BatchKernelMs)
			} else {
				got += ", no batch kernel time measured (split16 or steer-idle runs it)"
			}
			if nb, ok := rep.layout("steer-nobound"); ok && nb.Growths > 0 {
				got += fmt.Sprintf("; steer-nobound's P99 %.2f ms", nb.HandoffWaitP99Ms)
			}
		}
		if rep.Growth == growthAtOnce {
			got += "; a growth at once: its wait is the switch's alone, and the SMs pass as the batch's blocks leave them (the bursts' first 10 ms show what that costs)"
		}
		add(&must, ok, "steer: a growth's wait for queued work (P99 over the run's moves) <= the batch class's own kernel time", got)
		if st.Growths > 0 && st.HandoffWaitScaledMax > 0 {
			add(&other, st.HandoffWaitScaledMax <= 1, "steer: every growth's wait <= the batch's kernel at the SMs it had then (its kernel time scaled by its SMs)",
				fmt.Sprintf("the largest %.2fx", st.HandoffWaitScaledMax))
		}
		if f := st.FromFloor; f != nil && rep.BatchKernelMs > 0 {
			add(&other, f.P99 <= rep.BatchKernelMs, "steer: a burst's first growth's wait (from the floor, P99) <= the batch class's own kernel time",
				fmt.Sprintf("P99 %.2f ms (median %.2f) over %d against %.2f ms, %.2fx", f.P99, f.P50, f.N, rep.BatchKernelMs, f.P99/rep.BatchKernelMs))
		}
	}
	relName := "steer-r48" // the target 1.2x split48's, as the must-show states it; else the pool's relative one
	if _, ok := rep.layout(relName); !ok {
		relName = "steer-rel"
	}
	if rel, ok := rep.layout(relName); ok {
		got := fmt.Sprintf("worst %s, median %s, never %d, over %d bursts", recoveryMs(rel.RecoveryMaxMs), recoveryMs(rel.RecoveryMedianMs), rel.RecoveryNever, rel.Bursts)
		if rel.SDKRecovery != nil && rel.SDKRecovery.Count > 0 {
			got += fmt.Sprintf(" (the SDK's BurstRecovery: %d bursts, P99 <= %s ms, against its own target %.0f us)", rel.SDKRecovery.Count, leText(rel.SDKRecovery.P99LeMs), rel.LatencyTargetUs)
		}
		// "Back under target" reads a P99 as a server's dashboard and the
		// SDK's BurstRecovery do: over the recent requests (a 10 ms
		// window), not over every request since the burst's first, whose
		// tail keeps the requests queued before the first move for as
		// long as they are over 1% of the burst's (reported beside it).
		add(&must, rel.Bursts > 0 && rel.WindowNever == 0 && rel.WindowMaxMs <= 20,
			fmt.Sprintf("%s: every burst's P99 over a 10 ms window back under %s within 20 ms of its first request", relName, rep.RecoveryTargetIs),
			fmt.Sprintf("worst %s, median %s, never %d", recoveryMs(rel.WindowMaxMs), recoveryMs(rel.WindowMedianMs), rel.WindowNever))
		add(&other, rel.Bursts > 0 && rel.RecoveryNever == 0 && rel.RecoveryMaxMs <= 20,
			fmt.Sprintf("%s: every burst's P99 (of its requests since its first) back under %s within 20 ms of its first request", relName, rep.RecoveryTargetIs), got)
	}
	idleB, okB := rep.layout("steer-idle")
	idleN, okN := rep.layout("steer-idle-nobound")
	if okB && okN && idleN.BatchTFLOP > 0 {
		add(&must, idleB.BatchTFLOP >= 0.98*idleN.BatchTFLOP, "the batch class alone (steer-idle, bound on) >= 98% of its throughput without the bound (steer-idle-nobound)",
			fmt.Sprintf("%.1f TFLOP/s against %.1f, %.1f%%", idleB.BatchTFLOP, idleN.BatchTFLOP, 100*idleB.BatchTFLOP/idleN.BatchTFLOP))
	}
	if !haveSteer {
		return must, other
	}
	// The controller's own promise: its target, which the trim spends
	// down to (a target 48 SMs beat by far leaves the bound above to a
	// split the controller is not trying to match).
	if tgt := st.LatencyTargetUs; st.BurstP99 > 0 && tgt > 0 {
		add(&other, st.BurstP99 <= tgt, "steer burst P99 within its target", fmt.Sprintf("%.0f us against %.0f us", st.BurstP99, tgt))
	}
	// A floor for any controller: never worse than the smallest split it
	// starts from (run C2's fast variant: growing onto SMs still busy with
	// the batch's queued work gave 599 us against split16's 550).
	if have16 && s16.BurstP99 > 0 {
		add(&other, st.BurstP99 <= s16.BurstP99, "steer burst P99 <= split16's", fmt.Sprintf("%.0f us against %.0f, %.2fx", st.BurstP99, s16.BurstP99, st.BurstP99/s16.BurstP99))
	}
	if m, ok := rep.layout("mps"); ok && m.BurstP99 > 0 {
		add(&other, st.BurstP99 <= m.BurstP99, "steer burst P99 <= MPS 12%/88%'s", fmt.Sprintf("%.0f us against %.0f, %.2fx", st.BurstP99, m.BurstP99, st.BurstP99/m.BurstP99))
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
	add(&other, worst >= 0 && worst <= 50, "steer: every burst's P99 within -target within 50 ms of its first request (10 ms windows)", "worst "+recoveryMs(worst))
	return must, other
}

// tflops is a rate as the tables give it: three digits where it is under
// one (the simulator's chain).
func tflops(x float64) string {
	if x > 0 && x < 1 {
		return fmt.Sprintf("%.3g", x)
	}
	return fmt.Sprintf("%.1f", x)
}

func leText(ms float64) string {
	if ms < 0 {
		return "over 1000"
	}
	return fmt.Sprintf("%g", ms)
}

// recoveryMs is recoveryText with its unit.
func recoveryMs(ms float64) string {
	if t := recoveryText(ms); t != "never" {
		return t + " ms"
	}
	return "never"
}

func recoveryText(ms float64) string {
	switch {
	case ms < 0 || ms >= 1e9:
		return "never"
	}
	return fmt.Sprintf("%.0f", ms)
}

// writeBurstReport prints the medians over rounds per layout, each
// layout's reaction against the splits of the same run, each round's
// bursts and growths, and the checks.
func writeBurstReport(out io.Writer, rows []BurstRow, rep *BurstReport, b burstCfg) {
	med := func(l string, f func(BurstRow) float64) float64 {
		return medianOf(rows, func(r BurstRow) bool { return r.Layout == l }, f)
	}
	dash := func(format string, x float64) string {
		if x <= 0 {
			return "-"
		}
		return fmt.Sprintf(format, x)
	}
	fmt.Fprintln(out, "\n### Bursty interactive class beside the batch class (medians over rounds)")
	if rep.Growth == growthAtOnce {
		fmt.Fprintln(out, "\nThis binary's latency class grows at once (linked with internal/smmove's growth=at-once, the A/B's variant): a growth does not wait for the batch's queued work; each SM passes to the class as the batch's blocks leave it, the class's streams at the greatest priority.")
	}
	if len(rows) > 0 && rows[0].Simulated {
		fmt.Fprintln(out, "\nSimulated: the fake driver's timings, not a GPU's; the figures show the machinery runs, not what it achieves.")
	}
	fmt.Fprintln(out, "\n| layout | quiet P50 us | quiet P99 us | quiet max us | burst P50 us | burst P99 us | burst max us | batch TFLOP/s | batch quiet / burst | batch GEMM ms | moves |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range rep.Layouts {
		l := s.Layout
		phases := "-"
		if q := med(l, func(r BurstRow) float64 { return r.BatchQuietTFLOP }); q > 0 {
			phases = fmt.Sprintf("%.1f / %.1f", q, med(l, func(r BurstRow) float64 { return r.BatchBurstTFLOP }))
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f |\n", l,
			dash("%.0f", med(l, func(r BurstRow) float64 { return r.QuietP50 })), dash("%.0f", s.QuietP99),
			dash("%.0f", med(l, func(r BurstRow) float64 { return r.QuietMax })), dash("%.0f", med(l, func(r BurstRow) float64 { return r.BurstP50 })),
			dash("%.0f", s.BurstP99), dash("%.0f", med(l, func(r BurstRow) float64 { return r.BurstMax })),
			tflops(s.BatchTFLOP), phases, dash("%.2f", s.BatchGEMM), med(l, func(r BurstRow) float64 { return float64(r.Moves) }))
	}

	fmt.Fprintf(out, "\n### Reaction: against the splits, each burst's recovery (target %.0f us: %s), each growth's wait\n\n", rep.RecoveryTargetUs, rep.RecoveryTargetIs)
	fmt.Fprintf(out, "| layout | burst P99 / split48 | first %v of each burst: P99 us (/ split48's) | quiet P99 / split16 | batch / split16 | recovery since the first request: worst / median ms (never) | 10 ms windows: worst / median ms | growths | growth's wait for queued work P50 / P99 / max ms | move time P50 / P99 ms | Stats.SMMoveTime: n, mean, P99 <= ms | Stats.BurstRecovery: n, P99 <= ms | Stats.LatencyTarget us |\n", headWindow)
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range rep.Layouts {
		rec, win := "-", "-"
		if s.Bursts > 0 {
			rec = fmt.Sprintf("%s / %s (%d of %d)", recoveryText(s.RecoveryMaxMs), recoveryText(s.RecoveryMedianMs), s.RecoveryNever, s.Bursts)
			win = fmt.Sprintf("%s / %s", recoveryText(s.WindowMaxMs), recoveryText(s.WindowMedianMs))
		}
		waits, took := "-", "-"
		if s.Growths > 0 {
			waits = fmt.Sprintf("%.2f / %.2f / %.2f", s.HandoffWaitP50Ms, s.HandoffWaitP99Ms, s.HandoffWaitMaxMs)
		}
		if s.Moves > 0 {
			took = fmt.Sprintf("%.2f / %.2f", s.MoveTookP50Ms, s.MoveTookP99Ms)
		}
		hist := func(h *HistRow, mean bool) string {
			switch {
			case h == nil:
				return "-"
			case h.Count == 0:
				return "0"
			}
			if mean {
				return fmt.Sprintf("%d, %.2f, %s", h.Count, h.MeanMs, leText(h.P99LeMs))
			}
			return fmt.Sprintf("%d, %s", h.Count, leText(h.P99LeMs))
		}
		head := dash("%.0f", s.HeadP99)
		if s.HeadToSplit48 > 0 {
			head += " (" + ratio(s.HeadToSplit48) + ")"
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", s.Layout,
			ratio(s.BurstToSplit48), head, ratio(s.QuietToSplit16), dash("%.1f%%", 100*s.BatchToSplit16), rec, win, s.Growths, waits, took,
			hist(s.SMMoveTime, true), hist(s.SDKRecovery, false), dash("%.0f", s.LatencyTargetUs))
	}
	if rep.BatchKernelMs > 0 {
		fmt.Fprintf(out, "\nThe batch class's own kernel time: %.2f ms (%s 8192^3 GEMM, or the chain on the simulator: its FLOPs over its rate).", rep.BatchKernelMs, rep.BatchKernelFrom)
		l := strings.TrimSuffix(rep.BatchKernelFrom, "'s")
		if x := med(l, func(r BurstRow) float64 { return r.BatchStreamGEMMms }); x > 0 {
			fmt.Fprintf(out, " A worker's GEMM on its stream there, its %d workers side by side: %.2f ms.", b.batchK, x)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "\nPer burst (recovery since its first request, ms; 10 ms windows in brackets) and per growth of the interactive class (its wait for queued work, ms):")
	for _, r := range rows {
		var parts []string
		for c, first := range r.BurstFirstMs {
			if first < 0 {
				parts = append(parts, "no request")
				continue
			}
			parts = append(parts, fmt.Sprintf("%s (%s)", recoveryText(r.RecoverySinceFirstMs[c]), recoveryText(r.RecoveryWindowMs[c])))
		}
		line := fmt.Sprintf("- round %d %s: bursts %s", r.Round, r.Layout, strings.Join(parts, ", "))
		if len(parts) == 0 {
			line = fmt.Sprintf("- round %d %s: no requests", r.Round, r.Layout)
		}
		var ws []string
		floor := floorOf(r)
		for _, m := range r.MoveLog {
			if !m.Grows() {
				continue
			}
			w := fmt.Sprintf("%.2f", m.HandoffWaitMs)
			if floor > 0 && m.From > floor {
				w += fmt.Sprintf(" (from %d)", m.From)
			}
			ws = append(ws, w)
		}
		if len(ws) > 0 {
			line += "; growths " + strings.Join(ws, ", ")
		}
		fmt.Fprintln(out, line)
	}
	for _, s := range rep.Layouts {
		if s.FromFloor != nil || s.FromAbove != nil {
			fmt.Fprintf(out, "- %s's growths' waits (n, P50 / P99 / max): from the floor %s; from above it (after a trim) %s\n", s.Layout, s.FromFloor, s.FromAbove)
		}
	}

	judged := len(rows) == 0 || !rows[0].Simulated
	variant := "3 s / 1 s bounds, for bursts of half a second or more"
	if b.fast() {
		variant = "300 ms / 100 ms bounds, for bursts under half a second"
	}
	if len(rep.Checks) > 0 {
		fmt.Fprintf(out, "\nMust-show checks (%s; this run's medians; reported, not fatal):\n", variant)
		for _, c := range rep.Checks {
			printCheck(out, c, judged)
		}
	}
	if len(rep.OtherChecks) > 0 {
		fmt.Fprintln(out, "\nOther checks:")
		for _, c := range rep.OtherChecks {
			printCheck(out, c, judged)
		}
	}
	// What a controller that held a split's SMs through each burst and
	// split16's between would give: split16's quiet rate for the quiet
	// phases, that split's burst rate for the bursts; beside it the
	// split's burst P99 against split48's. Both of the must-show's bounds
	// (burst P99, batch) met by one split says a controller can meet them
	// on this card; neither split meeting both says the SMs' unit cannot.
	q16 := med("split16", func(r BurstRow) float64 { return r.BatchQuietTFLOP })
	st, ok := rep.layout("steer")
	s16, ok16 := rep.layout("split16")
	s48, ok48 := rep.layout("split48")
	if ok16 && q16 > 0 && s16.BatchTFLOP > 0 { // a quiet rate to mix with
		for _, l := range []string{"split32", "split40", "split48"} {
			bl := med(l, func(r BurstRow) float64 { return r.BatchBurstTFLOP })
			if bl <= 0 {
				continue
			}
			mix := (q16*b.quiet.Seconds() + bl*b.burst.Seconds()) / b.period().Seconds()
			fmt.Fprintf(out, "  split16's quiet rate with %s's burst rate: %s TFLOP/s, %.1f%% of split16's", l, tflops(mix), 100*mix/s16.BatchTFLOP)
			if sl, okl := rep.layout(l); okl && ok48 && s48.BurstP99 > 0 {
				fmt.Fprintf(out, "; %s's burst P99 %.2fx split48's", l, sl.BurstP99/s48.BurstP99)
			}
			if ok {
				fmt.Fprintf(out, "; steer %.1f%% of that mix", 100*st.BatchTFLOP/mix)
			}
			fmt.Fprintln(out)
		}
	}
	if rep.WallSeconds > 0 {
		fmt.Fprintf(out, "\nwall time %.0f s\n", rep.WallSeconds)
	}
}
