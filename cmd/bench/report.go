package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/bands"
)

// footnotes numbers the distinct published figures of the rows.
func footnotes(rows []Row) (marks map[string]int, notes []string) {
	marks = map[string]int{}
	for _, r := range rows {
		if r.Published == "" {
			continue
		}
		if _, ok := marks[r.Published]; !ok {
			notes = append(notes, r.Published)
			marks[r.Published] = len(notes)
		}
	}
	return marks, notes
}

// note is a row's note column: the baseline, the note, the footnote mark.
func (r Row) note(marks map[string]int) string {
	s := joinNote("vs "+r.Against, r.Note)
	if r.Skipped != "" {
		s = joinNote("vs "+r.Against, "SKIPPED: "+r.Skipped)
	}
	if m, ok := marks[r.Published]; ok {
		s += fmt.Sprintf(" [%d]", m)
	}
	return s
}

func (r Row) cells() (ours, base, ratio string) {
	if r.Skipped != "" {
		return "-", "-", "-"
	}
	return fmtNum(r.Ours), fmtNum(r.Baseline), fmtRatio(r.Ratio)
}

// fmtNum prints about four significant digits without exponents.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	case a >= 1:
		return fmt.Sprintf("%.3f", v)
	case a == 0:
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

// fmtRatio prints a ratio like a figure, with "-" where there is none.
func fmtRatio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmtNum(v)
}

func (r *Report) header() []string {
	m := r.Machine
	lines := []string{
		"device: " + m.GPU,
		fmt.Sprintf("machine: %d CPUs (GOMAXPROCS %d), %s, %s", m.CPUs, m.GOMAXPROCS, m.OS, m.Go),
		"date: " + r.Date.Format(time.RFC3339),
		"command: " + r.Command,
	}
	if m.Simulated {
		lines = append(lines, "SIMULATED: "+m.SimulatedWhy)
	}
	return lines
}

const ratioMeaning = "ratio = ours / baseline (below 1: ours takes less; for admitted/configured, above 1: ours is closer)"

// writeTable prints the human table.
func writeTable(w io.Writer, r *Report) error {
	for _, l := range r.header() {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, ratioMeaning)
	fmt.Fprintln(w)
	marks, notes := footnotes(r.Rows)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tours\tbaseline\tratio\tunit\tnote")
	section := ""
	for _, row := range r.Rows {
		if row.Section != section {
			section = row.Section
			fmt.Fprintf(tw, "[%s]\t\t\t\t\t\n", section)
		}
		o, b, x := row.cells()
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", row.Metric, o, b, x, row.Unit, row.note(marks))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nPublished figures, NOT measured here (for context only):")
		for i, n := range notes {
			fmt.Fprintf(w, "  [%d] %s\n", i+1, n)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "\n"+n)
	}
	return nil
}

// writeJSON prints the report as indented JSON.
func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// writeMarkdown prints the table as Markdown for docs/BENCHMARKS.md.
func writeMarkdown(w io.Writer, r *Report) error {
	fmt.Fprintln(w, "## Headline table (cmd/bench)")
	fmt.Fprintln(w)
	m := r.Machine
	fmt.Fprintf(w, "- Date: %s\n", r.Date.Format(time.RFC3339))
	fmt.Fprintf(w, "- GPU: %s (driver: %s)\n", m.GPU, m.Driver)
	if m.Simulated {
		fmt.Fprintf(w, "- **Simulated device** (%s): rows marked [sim] measure only the SDK's CPU overhead\n", m.SimulatedWhy)
	}
	fmt.Fprintf(w, "- CPUs: %d (GOMAXPROCS %d), %s, %s\n", m.CPUs, m.GOMAXPROCS, m.OS, m.Go)
	fmt.Fprintf(w, "- Command: `%s`\n", r.Command)
	if r.Quick {
		fmt.Fprintln(w, "- Quick run (-quick): few iterations, for checking the program, not for quoting")
	}
	fmt.Fprintf(w, "- %s\n\n", ratioMeaning)
	marks, notes := footnotes(r.Rows)
	fmt.Fprintln(w, "| section | metric | ours | baseline | ratio | unit | note |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---|---|")
	for _, row := range r.Rows {
		o, b, x := row.cells()
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", row.Section, mdEscape(row.Metric), o, b, x, row.Unit, mdEscape(row.note(marks)))
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nPublished figures, **not measured here** (for context only):")
		fmt.Fprintln(w)
		for i, n := range notes {
			fmt.Fprintf(w, "%d. [%d] %s\n", i+1, i+1, mdEscape(n))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "\n"+mdEscape(n))
	}
	return nil
}

// writePNG draws the ratios as horizontal bars, on a log scale (bars grow
// from 1x) when they span more than a decade.
func writePNG(path string, r *Report) error {
	c := bands.Chart{Title: "fcsp-go vs baselines, same run: ours / baseline", Axis: "ratio", Ref: 1, RefLine: true}
	if r.Machine.Simulated {
		c.Title += " (SIMULATED device)"
	}
	blue := color.RGBA{R: 0x3b, G: 0x76, B: 0xaf, A: 0xff}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, row := range r.Rows {
		if row.Skipped != "" || !(row.Ratio > 0) || math.IsInf(row.Ratio, 0) {
			continue
		}
		c.Rows = append(c.Rows, bands.Row{Label: row.Metric, Bars: []bands.Bar{{From: 1, To: row.Ratio, Color: blue}}})
		lo, hi = min(lo, row.Ratio), max(hi, row.Ratio)
	}
	if len(c.Rows) == 0 {
		return fmt.Errorf("-png: no ratios to draw")
	}
	if hi/lo > 10 {
		c.Log, c.Axis = true, "ratio (log scale; bars grow from 1x)"
	}
	return c.Save(path)
}
