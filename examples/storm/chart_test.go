package main

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

// The chart is drawn with the standard library: well-formed SVG, a step
// line per class that has SMs of its own (none for MPS), a P99 line per
// layout, the bursts shaded, the first round only.
func TestBurstChart(t *testing.T) {
	b := burstCfg{quiet: 300 * time.Millisecond, burst: 100 * time.Millisecond, cycles: 2, target: 300 * time.Microsecond}
	rows := []BurstRow{
		{Round: 1, Layout: "split16", SMs: [][2]int{{0, 16}, {800, 16}}, BatchSMs: [][2]int{{0, 116}, {800, 116}}, P99: [][2]float64{{0, 60}, {300, 480}, {310, 200}}},
		{Round: 1, Layout: "steer", SMs: [][2]int{{0, 16}, {305, 48}, {500, 40}, {800, 40}}, BatchSMs: [][2]int{{0, 116}, {305, 84}, {500, 92}, {800, 92}},
			P99: [][2]float64{{0, 70}, {300, 2500}, {310, 250}}},
		{Round: 1, Layout: "mps", P99: [][2]float64{{0, 68}, {300, 3400}}},
		{Round: 2, Layout: "split16", SMs: [][2]int{{0, 16}}, P99: [][2]float64{{0, 1}}},
	}
	svg := burstChart(rows, b)
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed: %v\n%s", err, svg)
			}
			break
		}
	}
	if n := strings.Count(svg, "<polyline"); n != 2+2+3 {
		t.Errorf("%d polylines, want 7: two SM lines each for split16 and steer, a P99 line for each of the three", n)
	}
	if n := strings.Count(svg, `fill="#eeeeee"`); n != 2*2 {
		t.Errorf("%d shaded bursts, want 2 cycles x 2 panels", n)
	}
	for _, want := range []string{"split16", "steer", "mps (threads, no SM split)", "300µs target", "1 ms", "800 ms"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	// steer's step line: 16 until 305 ms, then 48, then 40.
	if !strings.Contains(svg, steps(rows[1].SMs, func(ms float64) float64 { return chartLeft + ms/800*chartWidth },
		func(n float64) float64 { return chartTop + panelH - n/132*panelH })[2]) {
		t.Error("steer's SM steps missing")
	}
	if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
		t.Error("the chart has NaN or Inf coordinates")
	}
}
