package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/clocks"
	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// rest is the -sweep-sms entry for WithRestOfSMs; whole (0) is the
// unpartitioned baseline every repeat starts with.
const (
	whole = 0
	rest  = -1
)

// parseSizes reads a -sweep-sms list: SM counts above 0 and "rest", each
// once. An empty list is allowed only where allowEmpty.
func parseSizes(flagName, s string, allowEmpty bool) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		if allowEmpty {
			return nil, nil
		}
		return nil, fmt.Errorf("-%s is empty: want SM counts and rest, e.g. 8,16,rest", flagName)
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n := rest
		if f != "rest" {
			var err error
			if n, err = strconv.Atoi(f); err != nil || n <= 0 {
				return nil, fmt.Errorf("-%s: %q is not an SM count above 0 or rest", flagName, f)
			}
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("-%s: %s twice", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func sizeName(sms int) string {
	switch sms {
	case whole:
		return "whole"
	case rest:
		return "rest"
	}
	return strconv.Itoa(sms)
}

// sweepCase is one row to run: a tenant size, with or without cuBLAS's SM
// count hint.
type sweepCase struct {
	sms  int
	hint bool
}

// planSweep lists the rows in the order they run: per repeat the
// unpartitioned baseline, each size, then each size without the hint.
// Repeats are interleaved so that a drift (temperature, a neighbour) shows
// as spread within a size rather than as a gap between sizes.
func planSweep(sizes, noHint []int, repeats int) [][]sweepCase {
	plan := make([][]sweepCase, repeats)
	for r := range plan {
		plan[r] = append(plan[r], sweepCase{whole, true})
		for _, s := range sizes {
			plan[r] = append(plan[r], sweepCase{s, true})
		}
		for _, s := range noHint {
			plan[r] = append(plan[r], sweepCase{s, false})
		}
	}
	return plan
}

// SweepRow is the 8192^3 throughput of one tenant alone, in one repeat,
// with what NVML said while it ran.
type SweepRow struct {
	Size        string  `json:"size"` // whole, rest or the SM count asked for
	SMs         int     `json:"sms"`
	Partitioned bool    `json:"partitioned"`
	SmTarget    bool    `json:"sm_count_target"` // cublasSetSmCountTarget was called
	Repeat      int     `json:"repeat"`          // 1-based
	GEMMs       int     `json:"gemms"`
	Seconds     float64 `json:"seconds"`
	TFLOPs      float64 `json:"tflops"`
	PerSM       float64 `json:"tflops_per_sm"`
	PerSMGHz    float64 `json:"tflops_per_sm_ghz,omitempty"` // per SM per GHz of mean SM clock; 0: no clock
	// RatioLinear is PerSM over the same repeat's unpartitioned PerSM;
	// RatioClock the same for PerSMGHz (0 where a clock is missing).
	RatioLinear float64 `json:"ratio_to_linear"`
	RatioClock  float64 `json:"ratio_to_linear_clock,omitempty"`
	clocks.Clocks
}

// newSweepRow fills the derived figures of one row from its measurement.
func newSweepRow(c sweepCase, repeat, sms int, partitioned bool, gemms int, el time.Duration, clk clocks.Clocks) SweepRow {
	r := SweepRow{Size: sizeName(c.sms), SMs: sms, Partitioned: partitioned, SmTarget: c.hint, Repeat: repeat,
		GEMMs: gemms, Seconds: el.Seconds(), TFLOPs: tflops(gemms, el), Clocks: clk}
	if sms > 0 {
		r.PerSM = r.TFLOPs / float64(sms)
	}
	if clk.SMClockMHz > 0 {
		r.PerSMGHz = r.PerSM / (clk.SMClockMHz / 1e3)
	}
	return r
}

// setRatios divides each row's per-SM figures by those of the unpartitioned
// baseline of its own repeat.
func setRatios(rows []SweepRow) {
	base := map[int]SweepRow{}
	for _, r := range rows {
		if r.Size == sizeName(whole) && r.SmTarget {
			base[r.Repeat] = r
		}
	}
	for i, r := range rows {
		b, ok := base[r.Repeat]
		if !ok {
			continue
		}
		if b.PerSM > 0 {
			rows[i].RatioLinear = r.PerSM / b.PerSM
		}
		if b.PerSMGHz > 0 && r.PerSMGHz > 0 {
			rows[i].RatioClock = r.PerSMGHz / b.PerSMGHz
		}
	}
}

// Span is the smallest, mean and largest of one figure over the repeats.
type Span struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

func spanOf(v []float64) Span {
	if len(v) == 0 {
		return Span{}
	}
	s := Span{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range v {
		s.Min, s.Max, s.Mean = min(s.Min, x), max(s.Max, x), s.Mean+x
	}
	s.Mean /= float64(len(v))
	return s
}

// SweepSummary is one size (with or without the hint) over its repeats.
type SweepSummary struct {
	Size        string `json:"size"`
	SMs         int    `json:"sms"`
	SmTarget    bool   `json:"sm_count_target"`
	Repeats     int    `json:"repeats"`
	TFLOPs      Span   `json:"tflops"`
	PerSM       Span   `json:"tflops_per_sm"`
	PerSMGHz    Span   `json:"tflops_per_sm_ghz"`
	RatioLinear Span   `json:"ratio_to_linear"`
	RatioClock  Span   `json:"ratio_to_linear_clock"`
	SMClockMHz  Span   `json:"sm_clock_mhz"`
	PowerW      Span   `json:"power_w"`
	Reasons     string `json:"clock_reasons"` // every reason seen in any repeat
}

// summarizeSweep groups the rows by size and hint, in the order first run.
// A figure missing in a repeat (no clock) is left out of its span.
func summarizeSweep(rows []SweepRow) []SweepSummary {
	type key struct {
		size string
		hint bool
	}
	var order []key
	groups := map[key][]SweepRow{}
	for _, r := range rows {
		k := key{r.Size, r.SmTarget}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	pick := func(rs []SweepRow, f func(SweepRow) float64) Span {
		var v []float64
		for _, r := range rs {
			if x := f(r); x > 0 {
				v = append(v, x)
			}
		}
		return spanOf(v)
	}
	var out []SweepSummary
	for _, k := range order {
		rs := groups[k]
		var bits fcsp.ClockReasons
		known := false
		for _, r := range rs {
			bits |= fcsp.ClockReasons(r.ReasonBits)
			known = known || r.Reasons != "unknown"
		}
		s := SweepSummary{Size: k.size, SMs: rs[0].SMs, SmTarget: k.hint, Repeats: len(rs),
			TFLOPs:      pick(rs, func(r SweepRow) float64 { return r.TFLOPs }),
			PerSM:       pick(rs, func(r SweepRow) float64 { return r.PerSM }),
			PerSMGHz:    pick(rs, func(r SweepRow) float64 { return r.PerSMGHz }),
			RatioLinear: pick(rs, func(r SweepRow) float64 { return r.RatioLinear }),
			RatioClock:  pick(rs, func(r SweepRow) float64 { return r.RatioClock }),
			SMClockMHz:  pick(rs, func(r SweepRow) float64 { return r.SMClockMHz }),
			PowerW:      pick(rs, func(r SweepRow) float64 { return r.PowerW }),
			Reasons:     bits.String(),
		}
		if !known {
			s.Reasons = "unknown"
		}
		out = append(out, s)
	}
	return out
}

// sweep runs the plan: each row a tenant alone, 8192^3 GEMMs back to back
// for d, NVML sampled every clocks.Every meanwhile. Each row is printed as it
// ends.
func sweep(ctx context.Context, pool *fcsp.Pool, d time.Duration, plan [][]sweepCase, out io.Writer) ([]SweepRow, error) {
	var rows []SweepRow
	for rep, cases := range plan {
		for _, c := range cases {
			r, err := sweepOne(ctx, pool, d, c, rep+1)
			if err != nil {
				return rows, fmt.Errorf("%s SMs: %w", sizeName(c.sms), err)
			}
			fmt.Fprintf(out, "sweep repeat %d: %5s (%3d SMs, hint %-3s) %6.1f TFLOP/s  %4.0f MHz  %3.0f W  %s (%d NVML samples)%s\n",
				r.Repeat, r.Size, r.SMs, yesNo(r.SmTarget), r.TFLOPs, r.SMClockMHz, r.PowerW, r.Reasons, r.Samples, noteSuffix(r.Note))
			rows = append(rows, r)
		}
	}
	setRatios(rows)
	return rows, nil
}

func sweepOne(ctx context.Context, pool *fcsp.Pool, d time.Duration, c sweepCase, repeat int) (SweepRow, error) {
	t, err := pool.NewTenant(fmt.Sprintf("sweep-%s", sizeName(c.sms)), tenantOpts(c.sms)...)
	if err != nil {
		return SweepRow{}, err
	}
	defer t.Close()
	var opts []gemmjob.Option
	if !c.hint {
		opts = append(opts, gemmjob.WithoutSmCountTarget())
	}
	w, err := gemmjob.New(ctx, t, batchN, batchN, batchN, opts...)
	if err != nil {
		return SweepRow{}, err
	}
	defer w.Close(ctx)
	if err := errors.Join(w.Run(ctx), w.Check()); err != nil {
		return SweepRow{}, err
	}
	stopNVML := clocks.Sample(pool.NVML, clocks.Every)
	n, el, err := batchFor(ctx, w, d)
	clk := stopNVML()
	if err == nil {
		err = w.Check()
	}
	return newSweepRow(c, repeat, t.SMs(), t.Stats().Partitioned, n, el, clk), err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func noteSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " [" + n + "]"
}
