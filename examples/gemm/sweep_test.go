package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/clocks"
)

func TestSweepFlags(t *testing.T) {
	c, err := parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.sweepSMs, []int{8, 16, 32, 64, rest}) || !reflect.DeepEqual(c.sweepNoHint, []int{8, 16}) || c.sweepRepeats != 2 {
		t.Fatalf("defaults: %v %v %d", c.sweepSMs, c.sweepNoHint, c.sweepRepeats)
	}
	c, err = parse([]string{"-sweep-sms", " rest, 24 ,4", "-sweep-no-sm-target", "", "-sweep-repeats", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.sweepSMs, []int{rest, 24, 4}) || c.sweepNoHint != nil || c.sweepRepeats != 3 {
		t.Fatalf("%v %v %d", c.sweepSMs, c.sweepNoHint, c.sweepRepeats)
	}
	for _, bad := range []string{"", "0", "-8", "8,,16", "8,rest,rest", "whole", "8.5"} {
		_, err := parseSizes("sweep-sms", bad, false)
		if err == nil || !strings.Contains(err.Error(), "-sweep-sms") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestPlanSweepInterleavesRepeats(t *testing.T) {
	got := planSweep([]int{8, rest}, []int{8}, 2)
	one := []sweepCase{{whole, true}, {8, true}, {rest, true}, {8, false}}
	if !reflect.DeepEqual(got, [][]sweepCase{one, one}) {
		t.Fatalf("%v", got)
	}
}

// Two repeats of baseline, 8 SMs with and without the hint: each ratio is
// against its own repeat's baseline, raw and per GHz of the SM clock.
func TestSweepRatiosAndSummary(t *testing.T) {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	// GEMMs per second chosen for round TFLOP/s: one 8192^3 GEMM is 2*8192^3 flop.
	g := 2 * math.Pow(batchN, 3) / 1e12 // TFLOP per GEMM
	row := func(c sweepCase, rep, sms int, tf, mhz float64) SweepRow {
		gemms := 100
		el := sec(float64(gemms) * g / tf)
		return newSweepRow(c, rep, sms, c.sms != whole, gemms, el, clocks.Clocks{Samples: 10, SMClockMHz: mhz, PowerW: 600, Reasons: "none"})
	}
	rows := []SweepRow{
		row(sweepCase{whole, true}, 1, 132, 792, 1500),
		row(sweepCase{8, true}, 1, 8, 56, 1980),
		row(sweepCase{8, false}, 1, 8, 52, 1980),
		row(sweepCase{whole, true}, 2, 132, 660, 1250),
		row(sweepCase{8, true}, 2, 8, 56, 0), // NVML gave no clock in this repeat
		row(sweepCase{8, false}, 2, 8, 50, 1980),
	}
	setRatios(rows)
	// repeat 1: base 6 TFLOP/s per SM, 4 per SM per GHz.
	r := rows[1]
	if !near(r.PerSM, 7) || !near(r.RatioLinear, 7.0/6) || !near(r.PerSMGHz, 7/1.98) || !near(r.RatioClock, 7/1.98/4) {
		t.Fatalf("8 SMs, repeat 1: %+v", r)
	}
	if !near(rows[0].RatioLinear, 1) || !near(rows[0].RatioClock, 1) || !near(rows[3].RatioLinear, 1) {
		t.Fatal("the baseline is 1 against itself")
	}
	// repeat 2: base 5 per SM, 4 per SM per GHz; no clock: no clock ratio.
	if r := rows[4]; !near(r.RatioLinear, 7.0/5) || r.PerSMGHz != 0 || r.RatioClock != 0 {
		t.Fatalf("8 SMs, repeat 2: %+v", r)
	}
	sum := summarizeSweep(rows)
	if len(sum) != 3 || sum[0].Size != "whole" || sum[1].Size != "8" || !sum[1].SmTarget || sum[2].SmTarget {
		t.Fatalf("groups %+v", sum)
	}
	s := sum[1]
	if s.Repeats != 2 || !near(s.RatioLinear.Min, 7.0/6) || !near(s.RatioLinear.Max, 7.0/5) || !near(s.RatioClock.Min, s.RatioClock.Max) {
		t.Fatalf("8 SMs with hint: %+v", s)
	}
	if nh := sum[2]; !near(nh.TFLOPs.Min, 50) || !near(nh.TFLOPs.Max, 52) || !near(nh.TFLOPs.Mean, 51) {
		t.Fatalf("8 SMs without hint: %+v", nh)
	}

	dir := t.TempDir()
	var out bytes.Buffer
	rep := report{Sweep: rows, SweepSummary: sum}
	if err := rep.write(&out, filepath.Join(dir, "s.json"), filepath.Join(dir, "s.png")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"clock-normalised",
		"  whole  132  yes   660.0-792.0     5.500    4.000  1.000-1.000      1.000-1.000       1250-1500  600-600    none",
		"  8        8  no    50.0-52.0       6.375    3.220  1.083-1.250      0.789-0.821       1980-1980  600-600    none",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "s.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Sweep        []map[string]any `json:"sweep"`
		SweepSummary []map[string]any `json:"sweep_summary"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"sm_clock_mhz", "power_w", "clock_reasons", "tflops_per_sm", "tflops_per_sm_ghz", "ratio_to_linear_clock", "sm_count_target", "repeat"} {
		if _, ok := j.Sweep[1][k]; !ok {
			t.Errorf("JSON sweep row lacks %s: %v", k, j.Sweep[1])
		}
	}
	if len(j.SweepSummary) != 3 {
		t.Fatalf("JSON summary: %v", j.SweepSummary)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*max(1, math.Abs(b)) }
