package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// The figures: how long from a child's device fault until a
// replacement process serves again, step by step, and what the fault does
// to the latency of the class that keeps serving beside it.
//
// Every mark is a wall-clock time as UnixNano: the processes share a host,
// so the child's marks and the parent's compare on one clock (a step of the
// clock while the example runs would show as a wrong or negative step).

// marks are the moments from the child's bad launch to the replacement's
// first checked request, in the order they happen.
type marks struct {
	Launch  int64 `json:"launch"`  // the child launches the kernel with the bad address
	Seen    int64 `json:"seen"`    // the child sees the fault (the launch or its synchronize fails)
	Learned int64 `json:"learned"` // the parent reads the child's line saying so
	Killed  int64 `json:"killed"`  // the child, sent SIGKILL, has exited (the parent's Wait returned)
	Reaped  int64 `json:"reaped"`  // the parent sees the region give the child's memory back
	Started int64 `json:"started"` // the parent has started the replacement (exec done)
	Running int64 `json:"running"` // the replacement's main runs
	Open    int64 `json:"open"`    // the replacement's pool is open (fcsp.Open returned)
	Ready   int64 `json:"ready"`   // its tenant has loaded the kernel's module
	First   int64 `json:"first"`   // it has served its first checked request
}

// step is one step from the child's fault to the replacement serving.
type step struct {
	Name string
	Dur  time.Duration
}

// steps breaks the time from the fault seen to the first request served
// again into the steps the example sees; their sum is total exactly.
func (m marks) steps() (s []step, total time.Duration) {
	at := []struct {
		name string
		t    int64
	}{
		{"fault seen by the child", m.Seen},
		{"parent learns of it (the child's line read)", m.Learned},
		{"child killed (SIGKILL sent, exit waited)", m.Killed},
		{"child's memory reaped by the region", m.Reaped},
		{"replacement started (fork and exec)", m.Started},
		{"replacement running (its main entered)", m.Running},
		{"replacement's pool open (fcsp.Open)", m.Open},
		{"replacement's tenant and module loaded", m.Ready},
		{"replacement's first checked request served", m.First},
	}
	for i := 1; i < len(at); i++ {
		s = append(s, step{at[i].name, time.Duration(at[i].t - at[i-1].t)})
	}
	return s, time.Duration(m.First - m.Seen)
}

// sample is one of the parent's checked requests: when it started, on the
// wall clock, and how long it took, on the monotonic one.
type sample struct {
	Start int64
	Dur   time.Duration
}

func (s sample) end() int64 { return s.Start + int64(s.Dur) }

// recorder keeps the parent's samples; the serving goroutine appends, the
// supervisor counts them while it waits for enough.
type recorder struct {
	mu      sync.Mutex
	samples []sample
}

func (r *recorder) add(start time.Time, d time.Duration) {
	r.mu.Lock()
	r.samples = append(r.samples, sample{start.UnixNano(), d})
	r.mu.Unlock()
}

// countSince is how many requests ended at or after from.
func (r *recorder) countSince(from int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := len(r.samples) - 1; i >= 0 && r.samples[i].end() >= from; i-- {
		n++
	}
	return n
}

func (r *recorder) all() []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.samples)
}

// window is the latency of the parent's requests over one stretch of time.
type window struct {
	Name     string
	From, To int64 // UnixNano; To may be past the stretch asked for: Extended
	Asked    int64 // the end asked for, before any extension
	Requests int
	P50, P99 time.Duration
	Max      time.Duration
	Extended bool // too few requests in the stretch asked for: To moved on
}

// measure takes the requests in flight at any time in [from, to] (a request
// the fault stalled counts even if it began before), and, when they are
// fewer than least, moves to on to the end of the least-th request from from.
// samples are in the order served, one at a time, so by start.
func measure(name string, samples []sample, from, to int64, least int) window {
	w := window{Name: name, From: from, To: to, Asked: to}
	first := 0
	for first < len(samples) && samples[first].end() < from {
		first++
	}
	in := samples[first:]
	n := 0
	for n < len(in) && in[n].Start <= to {
		n++
	}
	if n < least && len(in) > n {
		n = min(least, len(in))
		w.To, w.Extended = in[n-1].end(), true
	}
	in = in[:n]
	w.Requests = n
	if n == 0 {
		return w
	}
	d := make([]time.Duration, n)
	for i, s := range in {
		d[i] = s.Dur
	}
	slices.Sort(d)
	w.P50, w.P99, w.Max = percentile(d, 0.50), percentile(d, 0.99), d[n-1]
	return w
}

// percentile is the nearest-rank percentile of sorted d.
func percentile(d []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(d)))) - 1
	return d[max(i, 0)]
}

// ms prints a duration in milliseconds with three decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

// tables writes the two markdown tables: the steps with their total, and
// the two windows with the ratio of their P99s.
func (r result) tables(w io.Writer) {
	steps, total := r.Marks.steps()
	fmt.Fprintf(w, "\nfault to serving again (child's fault seen -> replacement's first checked request)%s:\n\n", simNote(r.Simulated))
	fmt.Fprintln(w, "| step | duration |")
	fmt.Fprintln(w, "|---|---:|")
	for _, s := range steps {
		fmt.Fprintf(w, "| %s | %s |\n", s.Name, ms(s.Dur))
	}
	fmt.Fprintf(w, "| **total** | **%s** |\n", ms(total))
	fmt.Fprintf(w, "\nthe bad kernel ran %s from its launch until the child saw the fault (before the total; in the fault window)\n",
		ms(time.Duration(r.Marks.Seen-r.Marks.Launch)))
	fmt.Fprintf(w, "\nthe parent's checked requests (%s) beside the neighbour's fault:\n\n", "allocate, launch, synchronize, copy back, check, free")
	fmt.Fprintln(w, "| window | length | requests | P50 | P99 | max | P99 / quiet P99 |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, x := range []struct {
		name  string
		w     window
		ratio float64
	}{
		{"quiet (child holding memory, idle)", r.Quiet, 1},
		{"fault (bad launch -> replacement serving)", r.Fault, r.Ratio},
	} {
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %.2fx |\n", x.name, ms(time.Duration(x.w.To-x.w.From)),
			x.w.Requests, ms(x.w.P50), ms(x.w.P99), ms(x.w.Max), x.ratio)
	}
	for _, x := range []window{r.Quiet, r.Fault} {
		if x.Extended {
			fmt.Fprintf(w, "\nthe %s window held fewer than %d requests (-min-requests) in its %s: it was extended to %s, to hold %d\n",
				x.Name, r.MinRequests, ms(time.Duration(x.Asked-x.From)), ms(time.Duration(x.To-x.From)), x.Requests)
		} else if x.Requests < r.MinRequests {
			fmt.Fprintf(w, "\nthe %s window holds only %d requests (fewer than %d): its P99 is rough\n", x.Name, x.Requests, r.MinRequests)
		}
	}
	verdict := "met"
	if r.Ratio > 1.2 {
		verdict = "missed"
	}
	fmt.Fprintf(w, "\nP99 in the fault window / P99 quiet: %.2fx (goal: within 1.2x: %s)%s\n", r.Ratio, verdict, simNote(r.Simulated))
}

func simNote(sim bool) string {
	if sim {
		return " [simulated: the timings mean nothing]"
	}
	return ""
}

// report is the -json file: the same figures as the tables, durations in
// nanoseconds, marks as UnixNano.
type report struct {
	Simulated      bool       `json:"simulated"`
	Device         string     `json:"device"`
	Steps          []jsonStep `json:"steps"`
	TotalNs        int64      `json:"total_ns"`
	LaunchToSeenNs int64      `json:"bad_launch_to_fault_seen_ns"`
	Marks          marks      `json:"marks_unix_ns"`
	MinRequests    int        `json:"min_requests"`
	Windows        []jsonWin  `json:"windows"`
	Ratio          float64    `json:"p99_ratio_fault_over_quiet"`
	Goal           float64    `json:"p99_ratio_goal"`
}

type jsonStep struct {
	Step string  `json:"step"`
	Ns   int64   `json:"ns"`
	Ms   float64 `json:"ms"`
}

type jsonWin struct {
	Window       string  `json:"window"`
	FromUnixNs   int64   `json:"from_unix_ns"`
	ToUnixNs     int64   `json:"to_unix_ns"`
	AskedToNs    int64   `json:"asked_to_unix_ns"`
	Extended     bool    `json:"extended"`
	Requests     int     `json:"requests"`
	P50Ns        int64   `json:"p50_ns"`
	P99Ns        int64   `json:"p99_ns"`
	MaxNs        int64   `json:"max_ns"`
	RatioToQuiet float64 `json:"p99_over_quiet_p99"`
}

func (r result) report() report {
	steps, total := r.Marks.steps()
	rep := report{Simulated: r.Simulated, Device: r.Device, TotalNs: int64(total), LaunchToSeenNs: r.Marks.Seen - r.Marks.Launch,
		Marks: r.Marks, MinRequests: r.MinRequests, Ratio: r.Ratio, Goal: 1.2}
	for _, s := range steps {
		rep.Steps = append(rep.Steps, jsonStep{s.Name, int64(s.Dur), float64(s.Dur) / 1e6})
	}
	for _, x := range []struct {
		w     window
		ratio float64
	}{{r.Quiet, 1}, {r.Fault, r.Ratio}} {
		rep.Windows = append(rep.Windows, jsonWin{x.w.Name, x.w.From, x.w.To, x.w.Asked, x.w.Extended, x.w.Requests,
			int64(x.w.P50), int64(x.w.P99), int64(x.w.Max), x.ratio})
	}
	return rep
}

func writeJSON(path string, r result) error {
	b, err := json.MarshalIndent(r.report(), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// parseInts reads the n integers of a child's line such as "faulted 1 2".
func parseInts(s string, n int) ([]int64, error) {
	f := strings.Fields(s)
	if len(f) != n {
		return nil, fmt.Errorf("want %d numbers in %q", n, s)
	}
	v := make([]int64, n)
	for i, x := range f {
		if _, err := fmt.Sscan(x, &v[i]); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
	}
	return v, nil
}
