package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSummary(t *testing.T) {
	in := []float64{5, 1, 4, 2, 3}
	s := summarize(in)
	if in[0] != 5 {
		t.Error("summarize sorted its input in place")
	}
	if got := s.mean(); got != 3 {
		t.Errorf("mean = %v; want 3", got)
	}
	if got := s.p(50); got != 3 {
		t.Errorf("P50 = %v; want 3", got)
	}
	if got := s.p(99); got != 5 {
		t.Errorf("P99 = %v; want 5", got)
	}
	if !math.IsNaN(mean(nil)) {
		t.Error("mean of nothing is not NaN")
	}
}

func TestScaleTime(t *testing.T) {
	for _, c := range []struct {
		a, b   float64
		unit   string
		ax, bx float64
	}{
		{50, 120, "ns", 50, 120},
		{9999, 1, "ns", 9999, 1},
		{10e3, 500, "µs", 10, 0.5},
		{2e6, 150e6, "ms", 2, 150},
	} {
		unit, ax, bx := scaleTime(c.a, c.b)
		if unit != c.unit || ax != c.ax || bx != c.bx {
			t.Errorf("scaleTime(%v, %v) = %s %v %v; want %s %v %v", c.a, c.b, unit, ax, bx, c.unit, c.ax, c.bx)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		num  string
		rati string
	}{
		{0, "0", "-"},
		{0.000768, "0.000768", "0.000768"},
		{0.5, "0.5", "0.5"},
		{1.5, "1.500", "1.500"},
		{12.345, "12.35", "12.35"},
		{123.45, "123.5", "123.5"},
		{12345, "12345", "12345"},
		{math.NaN(), "-", "-"},
	} {
		if got := fmtNum(c.v); got != c.num {
			t.Errorf("fmtNum(%v) = %q; want %q", c.v, got, c.num)
		}
		if got := fmtRatio(c.v); got != c.rati {
			t.Errorf("fmtRatio(%v) = %q; want %q", c.v, got, c.rati)
		}
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-quick", "-sections", "rate, launch"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.quick || !c.sections["rate"] || !c.sections["launch"] || c.sections["create"] {
		t.Errorf("parsed %+v", c)
	}
	c, err = parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range allSections {
		if !c.sections[s] {
			t.Errorf("section %s not on by default", s)
		}
	}
	for _, bad := range [][]string{
		{"-sections", "nope"},
		{"-json", "-md"},
		{"-rate", "0"},
		{"-reps", "0"},
		{"extra"},
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

// TestQuickSimulated runs the whole program in -quick mode on the simulated
// H200 and checks every row and every output format.
func TestQuickSimulated(t *testing.T) {
	dir := t.TempDir()
	pngPath := filepath.Join(dir, "ratios.png")
	c, err := parseFlags([]string{"-quick", "-simulate", "-png", pngPath}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var progress bytes.Buffer
	start := time.Now()
	rep, err := measure(ctx, c, &progress)
	if err != nil {
		t.Fatalf("measure: %v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("measured in %v", time.Since(start))
	if !rep.Machine.Simulated || rep.Machine.CPUs <= 0 || rep.Machine.GPU == "" {
		t.Errorf("machine %+v", rep.Machine)
	}
	sections := map[string]int{}
	for _, r := range rep.Rows {
		sections[r.Section]++
		if r.Metric == "" || r.Unit == "" && r.Skipped == "" || r.Against == "" {
			t.Errorf("row %+v: missing metric, unit or baseline", r)
		}
		if r.Skipped != "" {
			if r.Section != "isolation" {
				t.Errorf("row %q skipped (%s); only isolation may skip on the simulator", r.Metric, r.Skipped)
			}
			continue
		}
		if !(r.Ours > 0) || !(r.Baseline > 0) || !(r.Ratio > 0) || math.IsInf(r.Ratio, 0) {
			t.Errorf("row %q: ours %v, baseline %v, ratio %v; want positive figures", r.Metric, r.Ours, r.Baseline, r.Ratio)
		}
		if math.Abs(r.Ratio-r.Ours/r.Baseline) > 1e-9*r.Ratio {
			t.Errorf("row %q: ratio %v is not ours/baseline %v", r.Metric, r.Ratio, r.Ours/r.Baseline)
		}
		if r.DriverBound && !strings.Contains(r.Note, "[sim]") {
			t.Errorf("row %q calls the driver but is not labelled simulated: %q", r.Metric, r.Note)
		}
	}
	for _, s := range allSections {
		if sections[s] == 0 {
			t.Errorf("no rows for section %s", s)
		}
	}
	if sections["memory"] != 8 || sections["contention"] != 4 || sections["create"] != 4 {
		t.Errorf("rows per section %v", sections)
	}
	if !strings.Contains(progress.String(), "bench: launch done") {
		t.Errorf("no progress lines:\n%s", progress.String())
	}

	var table bytes.Buffer
	if err := writeTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{"metric", "ours", "baseline", "ratio", "unit", "note", "SIMULATED", "NOT measured here", "94.1 ms", "84 ms", "120 ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	for _, r := range rep.Rows {
		if !strings.Contains(out, r.Metric) {
			t.Errorf("table lacks row %q", r.Metric)
		}
	}
	t.Logf("table:\n%s", out)

	var md bytes.Buffer
	if err := writeMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(md.String(), "\n| "); got != len(rep.Rows)+1 {
		t.Errorf("markdown has %d table lines; want %d rows and a header", got, len(rep.Rows)+1)
	}
	for _, want := range []string{"Date: ", "GPU: ", "CPUs: ", "Command: `", "|---|"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}

	var js bytes.Buffer
	if err := writeJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != len(rep.Rows) || back.Rows[0].Ours != rep.Rows[0].Ours {
		t.Errorf("JSON round trip lost rows")
	}

	if err := writePNG(pngPath, rep); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("chart is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("chart is %v", b)
	}
}

// TestRunFormats drives run itself, the way main does, on one cheap section.
func TestRunFormats(t *testing.T) {
	for _, flags := range [][]string{
		{"-quick", "-simulate", "-sections", "rate"},
		{"-quick", "-simulate", "-sections", "launch", "-json"},
		{"-quick", "-simulate", "-sections", "isolation", "-md"},
	} {
		c, err := parseFlags(flags, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), c, &stdout, &stderr); err != nil {
			t.Fatalf("%q: %v\n%s", flags, err, stderr.String())
		}
		if stdout.Len() == 0 || stderr.Len() == 0 {
			t.Errorf("%q: stdout %d bytes, stderr %d bytes", flags, stdout.Len(), stderr.Len())
		}
	}
}
