package main

import (
	"bytes"
	"math"
	"os"
	"runtime/metrics"
	"runtime/trace"
	"slices"
	"strconv"
	"sync"
	"time"
)

// cellTrace is -trace: the first cell of each kind in -trace-kinds, its
// window's first 150 ms traced once, so that a tail the figures do not
// explain (a stop of the world, a slow driver call, a thread that a
// request waited for) can be seen goroutine by goroutine, beside the same
// of the cell with no storm.
var cellTrace struct {
	prefix string
	kinds  []string
	mu     sync.Mutex
	done   map[string]bool
	busy   bool // one trace at a time: the runtime has one tracer
}

// startTrace traces the next 150 ms into <prefix>-<kind>.trace, the first
// time a cell of that kind measures.
func startTrace(kind string) {
	t := &cellTrace
	if t.prefix == "" || !slices.Contains(t.kinds, kind) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done[kind] || t.busy {
		return
	}
	f, err := os.Create(t.prefix + "-" + kind + ".trace")
	if err != nil {
		return
	}
	if err := trace.Start(f); err != nil {
		_ = f.Close()
		return
	}
	if t.done == nil {
		t.done = map[string]bool{}
	}
	t.done[kind], t.busy = true, true
	time.AfterFunc(150*time.Millisecond, func() {
		trace.Stop()
		_ = f.Close()
		t.mu.Lock()
		t.busy = false
		t.mu.Unlock()
	})
}

// goRuntime is what the Go runtime says of the process over a window: how
// long runnable goroutines waited for a thread (a request goroutine coming
// back from the driver among them), and how much the garbage collector
// ran. A tail the SDK's own waits do not explain shows here.
type goRuntime struct {
	sched, pauses, stopping *metrics.Float64Histogram
	gcs, allocs             uint64
}

var runtimeSamples = []metrics.Sample{
	{Name: "/sched/latencies:seconds"},
	{Name: "/sched/pauses/total/gc:seconds"},
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/gc/heap/allocs:bytes"},
	{Name: "/sched/pauses/stopping/gc:seconds"}, // the part of a pause spent stopping the goroutines
}

func readRuntime() goRuntime {
	s := make([]metrics.Sample, len(runtimeSamples))
	copy(s, runtimeSamples)
	metrics.Read(s)
	var r goRuntime
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		r.sched = s[0].Value.Float64Histogram()
	}
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		r.pauses = s[1].Value.Float64Histogram()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		r.gcs = s[2].Value.Uint64()
	}
	if s[3].Value.Kind() == metrics.KindUint64 {
		r.allocs = s[3].Value.Uint64()
	}
	if s[4].Value.Kind() == metrics.KindFloat64Histogram {
		r.stopping = s[4].Value.Float64Histogram()
	}
	return r
}

// histQuantile is the q quantile, in microseconds, of what was added to
// the cumulative histogram between a and b (the upper bound of the bucket
// it falls in; 0 with nothing added).
func histQuantile(a, b *metrics.Float64Histogram, q float64) float64 {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0
	}
	var total uint64
	for i := range b.Counts {
		total += b.Counts[i] - a.Counts[i]
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i := range b.Counts {
		seen += b.Counts[i] - a.Counts[i]
		if seen >= want {
			up := b.Buckets[i+1]
			if math.IsInf(up, 1) {
				up = b.Buckets[i]
			}
			return up * 1e6
		}
	}
	return 0
}

// runDelay is the time the process's threads have spent runnable but
// waiting for a core, summed over its threads (the second field of
// /proc/self/task/*/schedstat); 0 where there is no such file. A thread
// that exits takes its part with it.
func runDelay() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := bytes.Fields(b); len(f) >= 2 {
			if v, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
				total += v
			}
		}
	}
	return time.Duration(total)
}
