package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"os"
	"slices"
	"strings"
)

type report struct {
	Modes        []Result       `json:"modes"`
	Sweep        []SweepRow     `json:"sweep,omitempty"`         // every row of every repeat
	SweepSummary []SweepSummary `json:"sweep_summary,omitempty"` // per size, over the repeats
	ToAlone      []RatioAlone   `json:"p99_to_alone,omitempty"`
}

// RatioAlone is one mode's interactive P99 over the alone-on-partition P99
// of the same round, per round, with the median and range.
type RatioAlone struct {
	Mode     string    `json:"mode"`
	PerRound []float64 `json:"per_round"`
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
}

// ratiosToAlone divides each mode's P99 by the alone mode's P99 of the same
// round (rounds without an alone result are skipped); one row per mode
// other than alone, in the order the modes ran.
func ratiosToAlone(rounds [][]Result) []RatioAlone {
	var out []RatioAlone
	idx := map[string]int{}
	for _, rs := range rounds {
		alone := 0.0
		for _, r := range rs {
			if r.Mode == "alone" {
				alone = r.P99us
			}
		}
		if alone <= 0 {
			continue
		}
		for _, r := range rs {
			if r.Mode == "alone" {
				continue
			}
			i, ok := idx[r.Mode]
			if !ok {
				i = len(out)
				idx[r.Mode] = i
				out = append(out, RatioAlone{Mode: r.Mode})
			}
			out[i].PerRound = append(out[i].PerRound, r.P99us/alone)
		}
	}
	for i := range out {
		v := slices.Clone(out[i].PerRound)
		slices.Sort(v)
		n := len(v)
		out[i].Min, out[i].Max = v[0], v[n-1]
		out[i].Median = (v[(n-1)/2] + v[n/2]) / 2
	}
	return out
}

func (r report) write(out io.Writer, jsonPath, pngPath string) error {
	if len(r.SweepSummary) > 0 {
		writeSweep(out, r.SweepSummary)
	}
	if len(r.ToAlone) > 0 {
		fmt.Fprintln(out, "\ninteractive P99 / the same round's alone-on-partition (16 SMs) P99:")
		for _, a := range r.ToAlone {
			per := make([]string, len(a.PerRound))
			for i, x := range a.PerRound {
				per[i] = fmt.Sprintf("%.2f", x)
			}
			fmt.Fprintf(out, "  %-7s median %.2fx, range %.2f-%.2fx over %d round(s): %s\n", a.Mode, a.Median, a.Min, a.Max, len(a.PerRound), strings.Join(per, " "))
		}
	}
	if jsonPath != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	if pngPath != "" {
		f, err := os.Create(pngPath)
		if err != nil {
			return err
		}
		if err := png.Encode(f, r.chart()); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

// writeSweep prints one line per size: the TFLOP/s and ratios as min-max
// over the repeats, per SM and per SM per GHz as means. The clock-normalised
// ratio divides out the SM clock NVML saw, so what is left of a gap is the
// partition's, not the power cap's.
func writeSweep(out io.Writer, sum []SweepSummary) {
	fmt.Fprintf(out, "\n8192^3 bf16 GEMM throughput by tenant size (each alone, %d interleaved repeat(s), min-max; ratios to the same repeat's unpartitioned run;\n", sum[0].Repeats)
	fmt.Fprintln(out, "clock-normalised: TFLOP/s per SM per GHz of the mean SM clock NVML reported during the row; hint: cublasSetSmCountTarget)")
	fmt.Fprintf(out, "  %-5s  %3s  %-4s  %-13s  %6s  %7s  %-15s  %-16s  %-9s  %-9s  %s\n",
		"size", "SMs", "hint", "TFLOP/s", "/SM", "/SM/GHz", "ratio to linear", "clock-normalised", "SM MHz", "power W", "clock reasons")
	for _, s := range sum {
		fmt.Fprintf(out, "  %-5s  %3d  %-4s  %-13s  %6.3f  %7.3f  %-15s  %-16s  %-9s  %-9s  %s\n",
			s.Size, s.SMs, yesNo(s.SmTarget), fmtSpan(s.TFLOPs, 1), s.PerSM.Mean, s.PerSMGHz.Mean,
			fmtSpan(s.RatioLinear, 3), fmtSpan(s.RatioClock, 3), fmtSpan(s.SMClockMHz, 0), fmtSpan(s.PowerW, 0), s.Reasons)
	}
}

// fmtSpan is "min-max", or "-" where the figure is missing.
func fmtSpan(s Span, prec int) string {
	if s.Max == 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f-%.*f", prec, s.Min, prec, s.Max)
}

// chart draws, per mode, the interactive P99 (blue, log-free linear scale
// to the largest) and the batch TFLOP/s (orange, to the largest); then the
// sweep's mean ratio to linear per size, raw (green) and clock-normalised
// (teal), 1.0 at the grey line. No text: the table and -json carry the
// numbers.
func (r report) chart() image.Image {
	const w, h, bar, gap = 800, 300, 18, 14
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	var maxP99, maxTF float64
	for _, m := range r.Modes {
		maxP99, maxTF = max(maxP99, m.P99us), max(maxTF, m.BatchTFLOPs)
	}
	fill := func(x, height int, c color.Color) {
		draw.Draw(img, image.Rect(x, h-20-height, x+bar, h-20), &image.Uniform{c}, image.Point{}, draw.Src)
	}
	scale := func(v, m float64) int {
		if m == 0 {
			return 0
		}
		return int(v / m * (h - 40))
	}
	x := 10
	for _, m := range r.Modes {
		fill(x, scale(m.P99us, maxP99), color.RGBA{40, 90, 200, 255})
		fill(x+bar, scale(m.BatchTFLOPs, maxTF), color.RGBA{230, 130, 30, 255})
		x += 2*bar + gap
	}
	if len(r.SweepSummary) > 0 {
		line := h - 20 - scale(1, 1.2)
		draw.Draw(img, image.Rect(x, line, w-10, line+1), &image.Uniform{color.Gray{160}}, image.Point{}, draw.Src)
		for _, s := range r.SweepSummary {
			fill(x, scale(min(s.RatioLinear.Mean, 1.2), 1.2), color.RGBA{40, 160, 70, 255})
			fill(x+bar, scale(min(s.RatioClock.Mean, 1.2), 1.2), color.RGBA{30, 150, 160, 255})
			x += 2*bar + 6
		}
	}
	return img
}
