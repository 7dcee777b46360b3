package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Without a device (or without cuBLAS) the example says so and succeeds. An
// explicit -cublas path is used as given: on a GPU machine, even after a
// test in this process loaded the real cuBLAS, a missing path says "no
// cuBLAS". (Its name avoids "GPU" so that gpu-test.sh's -test.run GPU does
// not pick it; run it there with -test.run WithoutDevice.)
func TestWithoutDeviceOrCublasSaysSoAndExitsZero(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-cublas", filepath.Join(t.TempDir(), "libcublas-missing.so"), "-duration", "10ms"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	p, perr := fcsp.Open(context.Background(), 0)
	if errors.Is(perr, fcsp.ErrNoDriver) {
		if !strings.Contains(out.String(), "no GPU here") {
			t.Fatalf("output %q does not say there is no GPU", out.String())
		}
		return
	}
	if perr == nil {
		p.Close()
	}
	if !strings.Contains(out.String(), "no cuBLAS") {
		t.Fatalf("output %q does not say cuBLAS is missing", out.String())
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-modes", "nope"}, {"-duration", "0s"}, {"-mps-role", "both"}, {"-rounds", "0"},
		{"-sweep-repeats", "0"}, {"-sweep-sms", ""}, {"-sweep-sms", "8,0"}, {"-sweep-sms", "8,8"}, {"-sweep-no-sm-target", "x"}} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestChartAndJSON(t *testing.T) {
	dir := t.TempDir()
	r := report{Modes: []Result{{Mode: "shared", P99us: 1300, BatchTFLOPs: 770}, {Mode: "part16", P99us: 45, BatchTFLOPs: 700}},
		SweepSummary: []SweepSummary{{Size: "whole", SMs: 132, TFLOPs: Span{889, 889, 889}, RatioLinear: Span{1, 1, 1}},
			{Size: "8", SMs: 8, TFLOPs: Span{55, 55, 55}, RatioLinear: Span{0.99, 0.99, 0.99}}}}
	var out bytes.Buffer
	if err := r.write(&out, filepath.Join(dir, "g.json"), filepath.Join(dir, "g.png")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"g.json", "g.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "ratio to linear") {
		t.Fatal(out.String())
	}
}

// Each mode's P99 is divided by the alone P99 of its own round; a round
// without an alone result adds nothing; the median of an even count is the
// mean of the middle two.
func TestRatiosToAlone(t *testing.T) {
	rounds := [][]Result{
		{{Mode: "alone", P99us: 40}, {Mode: "part16", P99us: 44}, {Mode: "shared", P99us: 1200}},
		{{Mode: "alone", P99us: 50}, {Mode: "part16", P99us: 75}, {Mode: "shared", P99us: 1300}},
		{{Mode: "part16", P99us: 999}}, // no alone: skipped
		{{Mode: "alone", P99us: 45}, {Mode: "part16", P99us: 45}, {Mode: "shared", P99us: 1350}},
		{{Mode: "alone", P99us: 40}, {Mode: "part16", P99us: 48}},
	}
	got := ratiosToAlone(rounds)
	if len(got) != 2 || got[0].Mode != "part16" || got[1].Mode != "shared" {
		t.Fatalf("rows %+v", got)
	}
	p := got[0]
	if want := []float64{1.1, 1.5, 1, 1.2}; !slices.EqualFunc(p.PerRound, want, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
		t.Fatalf("part16 per round %v, want %v", p.PerRound, want)
	}
	if math.Abs(p.Median-1.15) > 1e-9 || p.Min != 1 || p.Max != 1.5 {
		t.Fatalf("part16 median %v range %v-%v, want 1.15, 1-1.5", p.Median, p.Min, p.Max)
	}
	if s := got[1]; len(s.PerRound) != 3 || math.Abs(s.Median-30) > 1e-9 || s.Min != 26 {
		t.Fatalf("shared %+v, want 3 rounds, median 30, min 26", s)
	}
	var out bytes.Buffer
	if err := (report{ToAlone: got}).write(&out, "", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "part16  median 1.15x, range 1.00-1.50x over 4 round(s): 1.10 1.50 1.00 1.20") {
		t.Fatal(out.String())
	}
}
