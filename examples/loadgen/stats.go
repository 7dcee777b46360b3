package main

import (
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sort"
	"text/tabwriter"
	"time"
)

// percentile is the nearest-rank percentile (p in [0, 100]) of sorted
// latencies: the smallest value with at least p% of the samples at or below
// it. Nearest rank never interpolates, so P999 of 100 samples is the
// slowest sample, not a made-up value past it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps float error from pushing an exact rank up by one
	// (99.9/100*1000 is 999.0000000000001).
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Latency summarises one class's successful requests.
type Latency struct {
	OK     int     `json:"ok"`
	Errors int     `json:"errors"` // non-200 answers and transport failures
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	P99Lo  float64 `json:"p99_ci95_lo_ms"` // the P99's 95% confidence interval from the sample count
	P99Hi  float64 `json:"p99_ci95_hi_ms"`
	P999   float64 `json:"p999_ms"`
	Max    float64 `json:"max_ms"`
	PerSec float64 `json:"per_sec"` // successful requests per second

	LastError string `json:"last_error,omitempty"`
}

// quantileCI is a distribution-free 95% confidence interval for the p-th
// percentile of sorted samples: the order statistics at ranks
// n p/100 -+ 1.96 sqrt(n q (1-q)) (normal approximation of the binomial
// count of samples below the true percentile). It says whether a P99 rests
// on enough samples: with n(1-q) under about 10 its upper end is the
// slowest sample.
func quantileCI(sorted []time.Duration, p float64) (lo, hi time.Duration) {
	n := float64(len(sorted))
	if n == 0 {
		return 0, 0
	}
	q := p / 100
	h := 1.96 * math.Sqrt(n*q*(1-q))
	l := int(math.Floor(n*q - h))
	u := int(math.Ceil(n*q+h)) + 1
	return sorted[min(max(l, 1), len(sorted))-1], sorted[min(max(u, 1), len(sorted))-1]
}

func summarize(lat []time.Duration, errs int, elapsed time.Duration) Latency {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	lo, hi := quantileCI(s, 99)
	l := Latency{OK: len(s), Errors: errs, P50: msf(percentile(s, 50)), P99: msf(percentile(s, 99)),
		P99Lo: msf(lo), P99Hi: msf(hi),
		P999: msf(percentile(s, 99.9)), Max: msf(percentile(s, 100))}
	if elapsed > 0 {
		l.PerSec = float64(len(s)) / elapsed.Seconds()
	}
	return l
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Row is one run: a mode (or "alone") under the load.
type Row struct {
	Mode        string  `json:"mode"`
	Round       int     `json:"round,omitempty"` // with -rounds > 1
	Device      string  `json:"device,omitempty"`
	Simulated   bool    `json:"simulated"`
	Seconds     float64 `json:"seconds"`
	Interactive Latency `json:"interactive"`
	Batch       Latency `json:"batch"`
	BatchNote   string  `json:"batch_note,omitempty"` // why the batch column is empty
	CleanExit   *bool   `json:"clean_exit,omitempty"` // spawned servers: exited 0 after SIGTERM
}

// Report is everything loadgen prints.
type Report struct {
	Settings map[string]any `json:"settings"`
	Rows     []Row          `json:"rows"`
	VsAlone  []VsAlone      `json:"p99_vs_alone,omitempty"`
}

// VsAlone is one mode's interactive P99 against the alone P99 of the same
// round, over the rounds: the median is the figure to quote, the range
// says how far one run can be from it.
type VsAlone struct {
	Mode   string    `json:"mode"`
	Ratios []float64 `json:"ratios"` // by round
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
}

// vsAlone pairs each mode row with the alone row of its round (rows are in
// run order, alone first in each round).
func vsAlone(rows []Row) []VsAlone {
	alone := map[int]float64{}
	var out []VsAlone
	idx := map[string]int{}
	for _, r := range rows {
		if r.Mode == "alone" {
			alone[r.Round] = r.Interactive.P99
			continue
		}
		a, ok := alone[r.Round]
		if !ok || a <= 0 || r.Interactive.OK == 0 {
			continue
		}
		i, ok := idx[r.Mode]
		if !ok {
			i = len(out)
			idx[r.Mode] = i
			out = append(out, VsAlone{Mode: r.Mode})
		}
		out[i].Ratios = append(out[i].Ratios, r.Interactive.P99/a)
	}
	for i := range out {
		s := append([]float64(nil), out[i].Ratios...)
		sort.Float64s(s)
		n := len(s)
		out[i].Min, out[i].Max = s[0], s[n-1]
		out[i].Median = (s[(n-1)/2] + s[n/2]) / 2
	}
	return out
}

func printTable(w io.Writer, r Report) {
	if len(r.Rows) > 0 && r.Rows[0].Device != "" {
		fmt.Fprintln(w, r.Rows[0].Device)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tinteractive P50 ms\tP99 ms\tP99 95% CI\tP999 ms\tok\terrors\tbatch req/s\tbatch ok\terrors\tclean exit\t")
	for _, row := range r.Rows {
		mode := row.Mode
		if row.Round > 0 {
			mode = fmt.Sprintf("%s #%d", row.Mode, row.Round)
		}
		batch := fmt.Sprintf("%.2f\t%d\t%d", row.Batch.PerSec, row.Batch.OK, row.Batch.Errors)
		if row.BatchNote != "" {
			batch = row.BatchNote + "\t-\t-"
		}
		clean := "-"
		if row.CleanExit != nil {
			clean = fmt.Sprint(*row.CleanExit)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f-%.3f\t%.3f\t%d\t%d\t%s\t%s\t\n", mode,
			row.Interactive.P50, row.Interactive.P99, row.Interactive.P99Lo, row.Interactive.P99Hi, row.Interactive.P999, row.Interactive.OK, row.Interactive.Errors, batch, clean)
	}
	tw.Flush()
	if len(r.VsAlone) > 0 {
		fmt.Fprintln(w, "interactive P99 / the same round's alone P99:")
		for _, v := range r.VsAlone {
			fmt.Fprintf(w, "  %s: median %.2fx, range %.2f-%.2fx over %d round(s):", v.Mode, v.Median, v.Min, v.Max, len(v.Ratios))
			for _, x := range v.Ratios {
				fmt.Fprintf(w, " %.2f", x)
			}
			fmt.Fprintln(w)
		}
	}
	if slices.ContainsFunc(r.Rows, func(row Row) bool { return row.Simulated }) {
		fmt.Fprintln(w, "simulated: the server ran on the simulated H200, whose kernels run on this host's CPU: the latencies and\n"+
			"rates above measure the host and the HTTP path, not a GPU, and say nothing of isolation; run the server on a GPU for those")
	}
	for _, row := range r.Rows {
		for _, c := range []struct {
			name string
			l    Latency
		}{{"interactive", row.Interactive}, {"batch", row.Batch}} {
			if c.l.LastError != "" {
				fmt.Fprintf(w, "%s, %s: %d failed; the last: %s\n", row.Mode, c.name, c.l.Errors, c.l.LastError)
			}
		}
	}
}

// checkLoopback refuses any address whose host is not the loopback by
// name: loadgen is a benchmark for one machine, never a tool to point at
// someone else's server.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	if port == "" {
		return fmt.Errorf("-addr %q: no port", addr)
	}
	switch host {
	case "127.0.0.1", "localhost", "::1":
		return nil
	}
	return fmt.Errorf("-addr %q: loadgen only talks to 127.0.0.1, localhost or ::1", addr)
}
