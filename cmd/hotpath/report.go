package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

type report struct {
	Date       string  `json:"date"`
	CPU        string  `json:"cpu"`
	CPUs       int     `json:"cpus"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	Go         string  `json:"go"`
	Command    string  `json:"command"`
	Rounds     int     `json:"rounds"`
	Calls      int     `json:"calls_per_cell"`
	Goroutines []int   `json:"goroutines"`
	LoadBefore string  `json:"loadavg_before"`
	LoadAfter  string  `json:"loadavg_after"`
	Seconds    float64 `json:"seconds"`
	Rows       []row   `json:"rows"`
	// Admission is the launch admission table (issue 19), if asked for.
	Admission []admissionRow `json:"admission,omitempty"`
}

type row struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	Vs    string `json:"vs,omitempty"`
	Note  string `json:"note,omitempty"`
	Cells []cell `json:"cells"`
}

func (r *report) row(name string) *row {
	for i := range r.Rows {
		if r.Rows[i].Name == name {
			return &r.Rows[i]
		}
	}
	return nil
}

// ns formats nanoseconds with three significant digits, in us from 10 us.
func ns(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v >= 10000:
		return fmt.Sprintf("%.1f us", v/1000)
	default:
		return fmt.Sprintf("%.0f ns", v)
	}
}

func (s spread) String() string {
	return fmt.Sprintf("%s [%s-%s]", ns(s.Median), ns(s.Min), ns(s.Max))
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func (r *report) write(w io.Writer, md bool) {
	sep, start, end := "  ", "", ""
	if md {
		sep, start, end = " | ", "| ", " |"
	}
	line := func(cols ...string) { fmt.Fprintln(w, start+strings.Join(cols, sep)+end) }
	rule := func(text, n int) { // text left-aligned columns, then figures
		if md {
			cols := make([]string, n)
			for i := range cols {
				cols[i] = "---:"
				if i < text {
					cols[i] = "---"
				}
			}
			line(cols...)
		}
	}
	fmt.Fprintf(w, "- Date: %s; %d round(s) of %d timed calls per cell, interleaved; %.0f s\n", r.Date, r.Rounds, r.Calls, r.Seconds)
	fmt.Fprintf(w, "- Machine: %s, %d CPUs (GOMAXPROCS %d), %s\n", r.CPU, r.CPUs, r.GOMAXPROCS, r.Go)
	fmt.Fprintf(w, "- Load (/proc/loadavg): before %s; after %s\n", r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(w, "- Command: `%s`\n", r.Command)
	fmt.Fprintln(w, "- Each figure: median of the rounds [min-max of the rounds]; every call timed alone, so each includes one time.Since (its row)")
	for _, which := range []string{"P50", "P99", "wall"} {
		title := which + " per call"
		if which == "wall" {
			title = "Wall time / calls (all goroutines together: the inverse of throughput)"
		}
		fmt.Fprintf(w, "\n%s\n\n", title)
		cols := []string{"path"}
		for _, g := range r.Goroutines {
			cols = append(cols, fmt.Sprintf("%d goroutines", g))
		}
		line(cols...)
		rule(1, len(cols))
		for _, rw := range r.Rows {
			cs := []string{rw.Name}
			for _, c := range rw.Cells {
				cs = append(cs, pick(c, which).String())
			}
			line(cs...)
		}
	}
	fmt.Fprintf(w, "\nRatios of medians (this row / the row it is measured against; below 1: this row is cheaper), P50 and P99\n\n")
	cols := []string{"path", "against"}
	for _, g := range r.Goroutines {
		cols = append(cols, fmt.Sprintf("%d: P50, P99", g))
	}
	line(cols...)
	rule(2, len(cols))
	for _, rw := range r.Rows {
		vs := r.row(rw.Vs)
		if vs == nil {
			continue
		}
		cs := []string{rw.Name, rw.Vs}
		for j, c := range rw.Cells {
			cs = append(cs, ratio(c.P50.Median, vs.Cells[j].P50.Median)+", "+ratio(c.P99.Median, vs.Cells[j].P99.Median))
		}
		line(cs...)
	}
	fmt.Fprintln(w, "\nNotes")
	fmt.Fprintln(w)
	for _, rw := range r.Rows {
		if rw.Note != "" {
			fmt.Fprintf(w, "- %s: %s\n", rw.Name, rw.Note)
		}
		for _, c := range rw.Cells {
			n := 0
			for _, f := range c.Rounds {
				n += f.Refused
			}
			if n > 0 {
				fmt.Fprintf(w, "- %s, %d goroutines: **%d refusals** in %d rounds, though the rate was set never to refuse\n", rw.Name, c.Goroutines, n, len(c.Rounds))
			}
		}
	}
}

func pick(c cell, which string) spread {
	switch which {
	case "P50":
		return c.P50
	case "P99":
		return c.P99
	}
	return c.Wall
}
