package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/benchstat"
)

func TestPercentileAndSpread(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if p := benchstat.Percentile(xs, 50); p != 5 {
		t.Errorf("P50 of 1..10 = %v; want 5 (nearest rank)", p)
	}
	if p := benchstat.Percentile(xs, 99); p != 10 {
		t.Errorf("P99 of 1..10 = %v; want 10", p)
	}
	if p := benchstat.Percentile(nil, 50); !math.IsNaN(p) {
		t.Errorf("P50 of nothing = %v; want NaN", p)
	}
	s := spreadOf([]float64{9, 1, 5, 3})
	if s != (spread{Median: 4, Min: 1, Max: 9}) {
		t.Errorf("spread of 9,1,5,3 = %+v; want median 4 in [1, 9]", s)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-rounds", "0"}, {"-calls", "10"}, {"-g", "0"}, {"-g", "x"}, {"-only", "("}, {"-only", "no such target"}, {"-admission", "-1"}} {
		if err := run(args, new(bytes.Buffer)); err == nil {
			t.Errorf("run(%q) accepted bad input", args)
		}
	}
}

// Every target runs (none refuses on its setup) and the report holds every
// row and the ratios the rows ask for.
func TestRunAllTargets(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-rounds", "2", "-calls", "200", "-g", "1,3", "-md", "-admission", "1000"}, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, tg := range targets() {
		if !strings.Contains(text, "| "+tg.name+" |") {
			t.Errorf("no row for %q", tg.name)
		}
		if tg.vs != "" && !strings.Contains(text, "| "+tg.name+" | "+tg.vs+" |") {
			t.Errorf("no ratio of %q against %q", tg.name, tg.vs)
		}
	}
	for _, p := range admissionPaths() {
		if !strings.Contains(text, "| "+p.name+" |") {
			t.Errorf("no admission row for %q", p.name)
		}
	}
	for _, want := range []string{"Load (/proc/loadavg): before", "P99 per call", "3 goroutines", "Launch admission, 1 goroutine"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestJSON(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-rounds", "3", "-calls", "100", "-g", "2", "-only", "atomic", "-admission", "512", "-json", "-"}, &out); err != nil {
		t.Fatal(err)
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 || len(r.Rows[0].Cells) != 1 || len(r.Rows[0].Cells[0].Rounds) != 3 {
		t.Fatalf("JSON = %+v; want one row, one cell, three rounds", r)
	}
	if len(r.Admission) != len(admissionPaths()) {
		t.Fatalf("JSON has %d admission rows; want %d", len(r.Admission), len(admissionPaths()))
	}
	for _, a := range r.Admission {
		if len(a.XFloor) != 3 || a.Refused != 0 || !(a.X.Min <= a.X.Median && a.X.Median <= a.X.Max) {
			t.Errorf("admission row %+v: want 3 rounds, no refusal, figures in order", a)
		}
	}
	if x := r.Admission[0].X; x != (spread{1, 1, 1}) {
		t.Errorf("the floor against itself = %+v; want 1", x)
	}
	c := r.Rows[0].Cells[0]
	if !(c.P50.Min <= c.P50.Median && c.P50.Median <= c.P50.Max && c.P50.Median <= c.P99.Max) {
		t.Errorf("figures out of order: %+v", c)
	}
}
