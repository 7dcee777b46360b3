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
// dashed; none under MPS, which splits threads) and the interactive P99
// per window on a log scale with the target, the burst phases shaded. SVG
// is text, so the example draws it with the standard library (as
// examples/day94 does) and stays on the SDK's public API.

var layoutColors = map[string]string{"split16": "#1f77b4", "split32": "#2ca02c", "split48": "#9467bd", "steer": "#d62728", "mps": "#ff7f0e"}

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
		if r.Round == rows[0].Round {
			first = append(first, r)
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
	lo, hi := float64(b.target.Microseconds()), float64(b.target.Microseconds())
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
		chartLeft, pY(float64(b.target.Microseconds())), chartLeft+chartWidth, pY(float64(b.target.Microseconds())))
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
		ly := chartTop + 10 + 20*i
		name := r.Layout
		if r.Layout == "mps" {
			name += " (threads, no SM split)"
		}
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="14" height="4" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n",
			chartLeft+chartWidth+12, ly, col, chartLeft+chartWidth+32, ly+6, html.EscapeString(name))
	}
	s.WriteString("</svg>\n")
	return s.String()
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
