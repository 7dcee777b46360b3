package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
)

// report is the whole run: every cell of every round, the %smid checks,
// the CUDA_DEVICE_MAX_CONNECTIONS row, and what finish derives from them.
type report struct {
	Args        []string    `json:"args"`
	Device      string      `json:"device,omitempty"`
	Simulated   bool        `json:"simulated"`
	Cells       []Cell      `json:"cells"`
	SMChecks    []SMCheck   `json:"smid_checks"`
	MaxConn     *MaxConnRow `json:"max_connections_1,omitempty"`
	Summary     []Summary   `json:"summary"`
	Scaling     []Scaling   `json:"scaling,omitempty"`
	Checks      []Check     `json:"checks"`
	WallSeconds float64     `json:"wall_seconds"`
}

// Summary is one (layout, K, storm) over its rounds: medians.
type Summary struct {
	Layout         string  `json:"layout"`
	K              int     `json:"k"`
	Storm          string  `json:"storm"`
	Work           string  `json:"work"`
	Rounds         int     `json:"rounds"`
	P50us          float64 `json:"p50_us"`
	P99us          float64 `json:"p99_us"`
	MaxUs          float64 `json:"max_us"`
	ReqPerS        float64 `json:"interactive_req_per_s"`
	BatchTFLOPs    float64 `json:"batch_tflops,omitempty"`
	CPU            float64 `json:"cpu_cores"`
	StormPerS      float64 `json:"storm_calls_per_s,omitempty"`
	CtxWaitP99us   float64 `json:"ctx_wait_p99_us"`
	SchedP99us     float64 `json:"sched_latency_p99_us"`
	GCPerS         float64 `json:"gc_per_s"`
	AllocMBPerS    float64 `json:"alloc_mb_per_s"`
	P99ToNoStorm   float64 `json:"p99_to_no_storm,omitempty"`   // median of the per-round ratios
	BatchToNoStorm float64 `json:"batch_to_no_storm,omitempty"` // median of the per-round ratios
}

// Scaling is K=16 against K=4 in one layout and storm row: the
// throughput ratio (median of the per-round ratios) and K=16's P99/P50.
type Scaling struct {
	Layout     string  `json:"layout"`
	Storm      string  `json:"storm"`
	Throughput float64 `json:"k16_to_k4_throughput"`
	P99ToP50   float64 `json:"k16_p99_to_p50"`
}

// Check is one must-show line: PASS or FAIL, with the figure.
type Check struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	Got  string `json:"got"`
}

// printCheck prints c as a line of a report's checks: PASS or FAIL, its
// name and what was measured; n/a where the run is not judged (the
// simulator, whose timings are not a GPU's).
func printCheck(out io.Writer, c Check, judged bool) {
	v := "FAIL"
	switch {
	case !judged:
		v = "n/a"
	case c.Pass:
		v = "PASS"
	}
	fmt.Fprintf(out, "%s %s: %s\n", v, c.Name, c.Got)
}

// medianOf is the median (the upper middle of an even count) of f over
// the rows keep takes: a layout's or a variant's figure over rounds.
func medianOf[R any](rows []R, keep func(R) bool, f func(R) float64) float64 {
	var v []float64
	for _, r := range rows {
		if keep(r) {
			v = append(v, f(r))
		}
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

type sumKey struct {
	layout string
	k      int
	storm  string
}

// finish sets each cell's ratios to the no-storm cell of its layout, K and
// round, then the summaries, the K=16/K=4 scaling and the checks.
func (r *report) finish(cfg config) {
	type roundKey struct {
		sumKey
		round int
	}
	base := map[roundKey]Cell{}
	for _, c := range r.Cells {
		if c.Storm == stormNone {
			base[roundKey{sumKey{c.Layout, c.K, ""}, c.Round}] = c
		}
		r.Simulated = r.Simulated || c.Simulated
	}
	for i, c := range r.Cells {
		b, ok := base[roundKey{sumKey{c.Layout, c.K, ""}, c.Round}]
		if !ok || c.Storm == stormNone {
			continue
		}
		if b.P99us > 0 {
			r.Cells[i].P99ToNoStorm = c.P99us / b.P99us
		}
		if b.BatchTFLOPs > 0 {
			r.Cells[i].BatchToNoStorm = c.BatchTFLOPs / b.BatchTFLOPs
		}
	}
	var order []sumKey
	groups := map[sumKey][]Cell{}
	for _, c := range r.Cells {
		k := sumKey{c.Layout, c.K, c.Storm}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	pick := func(cs []Cell, f func(Cell) float64) float64 {
		var v []float64
		for _, c := range cs {
			if x := f(c); x > 0 {
				v = append(v, x)
			}
		}
		return median(v)
	}
	byKey := map[sumKey]Summary{}
	r.Summary = nil
	for _, k := range order {
		cs := groups[k]
		s := Summary{Layout: k.layout, K: k.k, Storm: k.storm, Work: cs[0].Work, Rounds: len(cs),
			P50us:          pick(cs, func(c Cell) float64 { return c.P50us }),
			P99us:          pick(cs, func(c Cell) float64 { return c.P99us }),
			MaxUs:          pick(cs, func(c Cell) float64 { return c.MaxUs }),
			ReqPerS:        pick(cs, func(c Cell) float64 { return c.ReqPerS }),
			BatchTFLOPs:    pick(cs, func(c Cell) float64 { return c.BatchTFLOPs }),
			CPU:            pick(cs, func(c Cell) float64 { return c.CPU }),
			P99ToNoStorm:   pick(cs, func(c Cell) float64 { return c.P99ToNoStorm }),
			BatchToNoStorm: pick(cs, func(c Cell) float64 { return c.BatchToNoStorm }),
			CtxWaitP99us:   pick(cs, func(c Cell) float64 { return c.CtxWaitP99us }),
			SchedP99us:     pick(cs, func(c Cell) float64 { return c.SchedP99us }),
			GCPerS:         pick(cs, func(c Cell) float64 { return c.GCPerS }),
			AllocMBPerS:    pick(cs, func(c Cell) float64 { return c.AllocMBPerS }),
			StormPerS: pick(cs, func(c Cell) float64 {
				var t float64
				for _, v := range c.StormPerS {
					t += v
				}
				return t
			}),
		}
		r.Summary = append(r.Summary, s)
		byKey[k] = s
	}
	// K=16 against K=4, per round, where both ran.
	r.Scaling = nil
	for _, k := range order {
		if k.k != 16 {
			continue
		}
		var ratios []float64
		for _, c16 := range groups[k] {
			for _, c4 := range groups[sumKey{k.layout, 4, k.storm}] {
				if c4.Round == c16.Round && c4.ReqPerS > 0 {
					ratios = append(ratios, c16.ReqPerS/c4.ReqPerS)
				}
			}
		}
		if len(ratios) == 0 {
			continue
		}
		s := byKey[k]
		sc := Scaling{Layout: k.layout, Storm: k.storm, Throughput: median(ratios)}
		if s.P50us > 0 {
			sc.P99ToP50 = s.P99us / s.P50us
		}
		r.Scaling = append(r.Scaling, sc)
	}
	r.Checks = checks(byKey, r.Scaling, order)
}

// checks are the matrix's must-show lines, on the partitioned layout.
func checks(byKey map[sumKey]Summary, scaling []Scaling, order []sumKey) []Check {
	var out []Check
	add := func(pass bool, name, got string) { out = append(out, Check{name, pass, got}) }
	for _, k := range order {
		if k.layout != "partitioned" || k.storm == stormNone {
			continue
		}
		s := byKey[k]
		if s.P99ToNoStorm > 0 {
			add(s.P99ToNoStorm <= 1.2, fmt.Sprintf("partitioned K=%d storm %s: P99 <= 1.2x no-storm P99", k.k, k.storm),
				fmt.Sprintf("%.1f us, %.2fx", s.P99us, s.P99ToNoStorm))
		}
		if k.k == 1 {
			add(s.P99us <= 80, fmt.Sprintf("partitioned K=1 storm %s: P99 <= 80 us", k.storm), fmt.Sprintf("%.1f us", s.P99us))
		}
		if s.BatchToNoStorm > 0 {
			add(s.BatchToNoStorm >= 0.95, fmt.Sprintf("partitioned K=%d storm %s: batch >= 95%% of no-storm", k.k, k.storm),
				fmt.Sprintf("%.1f TFLOP/s, %.1f%%", s.BatchTFLOPs, 100*s.BatchToNoStorm))
		}
	}
	// A batch class made with no SM option beside the
	// partition, against the same work made WithRestOfSMs.
	for _, k := range order {
		if k.layout != "plainbatch" {
			continue
		}
		pl, pa := byKey[k], byKey[sumKey{"partitioned", k.k, k.storm}]
		if pa.P99us == 0 {
			continue
		}
		add(pl.P99us <= 1.2*pa.P99us, fmt.Sprintf("plainbatch K=%d storm %s: P99 <= 1.2x partitioned's (batch WithRestOfSMs)", k.k, k.storm),
			fmt.Sprintf("%.1f us against %.1f, %.2fx", pl.P99us, pa.P99us, pl.P99us/pa.P99us))
		if pa.BatchTFLOPs > 0 {
			out = append(out, Check{fmt.Sprintf("plainbatch K=%d storm %s: batch against WithRestOfSMs's (reported)", k.k, k.storm), true,
				fmt.Sprintf("%.1f TFLOP/s against %.1f, %.2fx", pl.BatchTFLOPs, pa.BatchTFLOPs, pl.BatchTFLOPs/pa.BatchTFLOPs)})
		}
	}
	for _, sc := range scaling {
		if sc.Layout != "partitioned" || sc.Storm != stormNone {
			continue
		}
		add(sc.Throughput >= 0.9, "partitioned no storm: K=16 throughput >= 90% of K=4", fmt.Sprintf("%.1f%%", 100*sc.Throughput))
		add(sc.P99ToP50 <= 2, "partitioned no storm: K=16 P99 <= 2x P50", fmt.Sprintf("%.2fx", sc.P99ToP50))
	}
	return out
}

// smError is the run's failure: a partitioned layout whose classes ran on
// the same SM.
func (r *report) smError() error {
	for _, c := range r.SMChecks {
		if c.MustBeDisjoint && len(c.Overlap) > 0 {
			return fmt.Errorf("%w: round %d %s: SMs %v", ErrSMOverlap, c.Round, c.Layout, c.Overlap)
		}
	}
	return nil
}

func ratio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

func (r *report) write(out io.Writer, jsonPath string) error {
	fmt.Fprintln(out, "\n### Interactive latency under the storm (medians over rounds)")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| layout | K | storm | work | P50 us | P99 us | max us | req/s | batch TFLOP/s | CPU cores | storm calls/s | ctx wait P99 us | Go sched P99 us | GC/s | alloc MB/s | P99 / no storm | batch / no storm | rounds |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.Summary {
		tf := "-"
		if s.BatchTFLOPs > 0 {
			tf = fmt.Sprintf("%.1f", s.BatchTFLOPs)
			if s.BatchTFLOPs < 1 {
				tf = fmt.Sprintf("%.3g", s.BatchTFLOPs) // the simulator's chain
			}
		}
		fmt.Fprintf(out, "| %s | %d | %s | %s | %.1f | %.1f | %.1f | %.0f | %s | %.2f | %.0f | %.1f | %.1f | %.1f | %.0f | %s | %s | %d |\n",
			s.Layout, s.K, s.Storm, s.Work, s.P50us, s.P99us, s.MaxUs, s.ReqPerS, tf, s.CPU, s.StormPerS, s.CtxWaitP99us,
			s.SchedP99us, s.GCPerS, s.AllocMBPerS, ratio(s.P99ToNoStorm), ratio(s.BatchToNoStorm), s.Rounds)
	}
	if len(r.Scaling) > 0 {
		fmt.Fprintln(out, "\nK=16 against K=4:")
		for _, sc := range r.Scaling {
			fmt.Fprintf(out, "- %s, storm %s: throughput %.2fx of K=4, P99/P50 at K=16 %.2f\n", sc.Layout, sc.Storm, sc.Throughput, sc.P99ToP50)
		}
	}
	fmt.Fprintf(out, "\n%%smid:\n")
	for _, c := range r.SMChecks {
		fmt.Fprintln(out, "-", c)
	}
	if r.MaxConn != nil {
		fmt.Fprintln(out, "\n"+r.MaxConn.String())
	}
	fmt.Fprintln(out, "\nMust-show checks (performance: reported, not fatal):")
	if r.Simulated {
		fmt.Fprintln(out, "(on the simulator: its timings are not a GPU's, so each check is reported, not judged: n/a)")
	}
	for _, c := range r.Checks {
		printCheck(out, c, !r.Simulated)
	}
	fmt.Fprintf(out, "\nwall time %.0f s\n", r.WallSeconds)
	if jsonPath == "" {
		return nil
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(jsonPath, b, 0o644)
}
