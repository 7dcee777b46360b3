package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The chart is drawn with the standard library (examples use the SDK's
// public API only; it imported internal/bands before, issue 27 #8).
func TestSavePlotWritesSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "day94.svg")
	err := savePlot(path, []Schedule{{Name: "fcsp <partitioned>", AllDone: 40, ShortDone: 5}, {Name: "shared", AllDone: 38}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range []string{"<svg", "fcsp &lt;partitioned&gt;", "shared", "40.0", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<rect"); n != 5 { // 2 legend keys, 2 bars, 1 short bar
		t.Errorf("%d rects, want 5", n)
	}
}
