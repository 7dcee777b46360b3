package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"strings"
	"time"
)

// The -burst chart: the first round's layouts on one time axis, in two
// panels: the SMs each class held (the interactive class solid, the batch
// dashed; none under MPS, which splits threads), with a tick at the top
// for each SM move, and the interactive P99 per window on a log scale
// with the target (and the recoveries' target, where it differs), a
// circle where each burst's P99 got back under the recoveries' target
// (a cross at the burst's end where it never did), the burst phases
// shaded. The layouts whose interactive class sends nothing (steer-idle)
// are left out. SVG is text, so the example draws it with the standard
// library (as examples/day94 does) and stays on the SDK's public API.

var layoutColors = map[string]string{"split16": "#1f77b4", "split32": "#2ca02c", "split40": "#17becf", "split48": "#9467bd", "steer": "#d62728", "mps": "#ff7f0e",
	"steer-nobound": "#8c564b", "steer-rel": "#e377c2"}

const (
	chartLeft, chartWidth, chartRight = 70, 760, 190
	chartTop, panelH, panelGap        = 50, 220, 60
)

// writeBurstChart writes the first round's rows as an SVG file at path.
func writeBurstChart(path string, rows []BurstRow, b burstCfg) error {
	return os.WriteFile(path, []byte(burstChart(rows, b)), 0o644)
}

func burstChart(rows []BurstRow, b burstCfg) string {
	var first []BurstRow
	for _, r := range rows {
		if r.Round == rows[0].Round && !idle(r.Layout) {
			first = append(first, r)
		}
	}
	tgt := float64(b.target.Microseconds())
	recTgt := tgt // the recoveries' target
	for _, r := range first {
		if r.RecoveryTargetUs > 0 {
			recTgt = r.RecoveryTargetUs
		}
	}
	span := float64((time.Duration(b.cycles) * b.period()).Milliseconds())
	if span <= 0 {
		span = 1
	}
	x := func(ms float64) float64 { return chartLeft + min(max(ms/span, 0), 1)*chartWidth }
	top2 := chartTop + panelH + panelGap
	smY := func(sms float64) float64 { return chartTop + panelH - sms/132*panelH }
	// The P99 panel's scale: whole decades around the figures and target.
	lo, hi := min(tgt, recTgt), max(tgt, recTgt)
	for _, r := range first {
		for _, p := range r.P99 {
			if p[1] > 0 {
				lo, hi = min(lo, p[1]), max(hi, p[1])
			}
		}
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(max(lo, 1)))), math.Pow(10, math.Ceil(math.Log10(max(hi, 10))))
	if hi <= lo {
		hi = lo * 10
	}
	pY := func(us float64) float64 {
		f := (math.Log10(max(us, lo)) - math.Log10(lo)) / (math.Log10(hi) - math.Log10(lo))
		return float64(top2+panelH) - min(f, 1)*panelH
	}

	var s strings.Builder
	h := top2 + panelH + 50
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", chartLeft+chartWidth+chartRight, h)
	title := fmt.Sprintf("storm -burst %v/%v, round %d: SMs per class and interactive P99 over time", b.quiet, b.burst, rounds(first))
	if len(first) > 0 && first[0].Simulated {
		title += " (simulated: the fake driver's timings, not a GPU's)"
	}
	fmt.Fprintf(&s, `<text x="10" y="20" font-size="14">%s</text>`+"\n", html.EscapeString(title))
	// Burst phases, shaded in both panels.
	for c := range b.cycles {
		from := float64((time.Duration(c)*b.period() + b.quiet).Milliseconds())
		to := float64((time.Duration(c+1) * b.period()).Milliseconds())
		for _, y := range []int{chartTop, top2} {
			fmt.Fprintf(&s, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eeeeee"/>`+"\n", x(from), y, x(to)-x(from), panelH)
		}
	}
	// Axes and ticks.
	for _, y := range []int{chartTop, top2} {
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>`+"\n", chartLeft, y, chartWidth, panelH)
	}
	fmt.Fprintf(&s, `<text x="%d" y="%d">SMs held (solid: interactive, dashed: batch)</text>`+"\n", chartLeft, chartTop-6)
	for _, n := range []float64{0, 16, 48, 84, 116, 132} {
		fmt.Fprintf(&s, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`, chartLeft-6, smY(n)+4, n)
	}
	fmt.Fprintf(&s, "\n"+`<text x="%d" y="%d">interactive P99 per %.0f ms window (µs, log scale; dashed: the %v target)</text>`+"\n", chartLeft, top2-6, b.p99Window().Seconds()*1e3, b.target)
	for d := lo; d <= hi*1.0001; d *= 10 {
		fmt.Fprintf(&s, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, chartLeft-6, pY(d)+4, usText(d))
	}
	fmt.Fprintf(&s, "\n"+`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black" stroke-dasharray="6,4"/>`+"\n",
		chartLeft, pY(tgt), chartLeft+chartWidth, pY(tgt))
	if recTgt != tgt {
		fmt.Fprintf(&s, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555555" stroke-dasharray="2,3"/>`+"\n",
			chartLeft, pY(recTgt), chartLeft+chartWidth, pY(recTgt))
		fmt.Fprintf(&s, `<text x="%d" y="%.1f" font-size="10" fill="#555555">recoveries' target %s</text>`+"\n", chartLeft+4, pY(recTgt)-3, usText(recTgt))
	}
	for c := 0; c <= b.cycles; c++ {
		ms := float64((time.Duration(c) * b.period()).Milliseconds())
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(ms), top2+panelH+16, msText(ms))
	}
	fmt.Fprintf(&s, "\n"+`<text x="%d" y="%d" text-anchor="middle">time since the first phase (grey: bursts of 16 request goroutines; white: 1)</text>`+"\n",
		chartLeft+chartWidth/2, top2+panelH+34)
	// The series, one colour per layout, and the legend.
	for i, r := range first {
		col := layoutColors[r.Layout]
		if col == "" {
			col = "#555555"
		}
		if len(r.SMs) > 0 {
			polyline(&s, steps(r.SMs, x, smY), col, "")
		}
		if len(r.BatchSMs) > 0 {
			polyline(&s, steps(r.BatchSMs, x, smY), col, `stroke-dasharray="5,3"`)
		}
		if len(r.P99) > 0 {
			var pts []string
			for _, p := range r.P99 {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), pY(p[1])))
			}
			polyline(&s, pts, col, "")
		}
		reactionMarks(&s, r, b, x, pY(recTgt), col)
		ly := chartTop + 10 + 20*i
		name := r.Layout
		if r.Layout == "mps" {
			name += " (threads, no SM split)"
		}
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			chartLeft+chartWidth+12, ly, col, chartLeft+chartWidth+32, ly+6, html.EscapeString(name))
	}
	if len(first) > 0 {
		ly := chartTop + 10 + 20*len(first)
		fmt.Fprintf(&s, `<text x="%d" y="%d" font-size="10">circles: a burst's P99 back</text>`+"\n", chartLeft+chartWidth+12, ly+6)
		fmt.Fprintf(&s, `<text x="%d" y="%d" font-size="10">under the recoveries' target</text>`+"\n", chartLeft+chartWidth+12, ly+18)
		fmt.Fprintf(&s, `<text x="%d" y="%d" font-size="10">ticks on top: SM moves</text>`+"\n", chartLeft+chartWidth+12, ly+30)
	}
	s.WriteString("</svg>\n")
	return s.String()
}

// reactionMarks draws a row's reaction: per burst, a circle on the
// recoveries' target (at y) where its P99 got back under it, or a cross
// at the burst's end where it never did; per SM move, a tick at the top
// of the SM panel. Each says its figures in a tooltip.
func reactionMarks(s *strings.Builder, r BurstRow, b burstCfg, x func(float64) float64, y float64, col string) {
	for c, first := range r.BurstFirstMs {
		if first < 0 || c >= len(r.RecoverySinceFirstMs) {
			continue
		}
		rec := r.RecoverySinceFirstMs[c]
		tip := fmt.Sprintf("%s, burst %d: P99 back under %s %s ms after its first request", r.Layout, c+1, usText(r.RecoveryTargetUs), recoveryText(rec))
		if rec < 0 {
			end := float64((time.Duration(c+1) * b.period()).Milliseconds())
			fmt.Fprintf(s, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s" font-size="11"><title>%s</title>×</text>`+"\n",
				x(end), y+4, col, html.EscapeString(tip))
			continue
		}
		fmt.Fprintf(s, `<circle cx="%.1f" cy="%.1f" r="3" fill="none" stroke="%s"><title>%s</title></circle>`+"\n",
			x(first+rec), y, col, html.EscapeString(tip))
	}
	for _, m := range r.MoveLog {
		tip := fmt.Sprintf("%s: %d -> %d SMs (%s), %.2f ms from the decision to the new SMs serving, %.2f ms waiting for queued work",
			r.Layout, m.From, m.To, m.Kind, m.TookMs, m.HandoffWaitMs)
		if m.Refused != "" {
			tip = fmt.Sprintf("%s: %d -> %d SMs refused: %s", r.Layout, m.From, m.To, m.Refused)
		}
		fmt.Fprintf(s, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"><title>%s</title></line>`+"\n",
			x(m.AtMs), chartTop, x(m.AtMs), chartTop+8, col, html.EscapeString(tip))
	}
}

// steps is a series of change points [ms, SMs] as a step line's points:
// each value held until the next change.
func steps(series [][2]int, x, y func(float64) float64) []string {
	var pts []string
	for i, p := range series {
		if i > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(p[0])), y(float64(series[i-1][1]))))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(p[0])), y(float64(p[1]))))
	}
	return pts
}

func polyline(s *strings.Builder, pts []string, col, extra string) {
	fmt.Fprintf(s, `<polyline fill="none" stroke="%s" stroke-width="1.5" %s points="%s"/>`+"\n", col, extra, strings.Join(pts, " "))
}

func rounds(rows []BurstRow) int {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].Round
}

func usText(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.0f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.0f ms", us/1e3)
	}
	return fmt.Sprintf("%.0f µs", us)
}

func msText(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%.1f s", ms/1000)
	}
	return fmt.Sprintf("%.0f ms", ms)
}
