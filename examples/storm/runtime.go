package main

import (
	"math"
	"runtime/metrics"
)

// goRuntime is what the Go runtime says of the process over a window: how
// long runnable goroutines waited for a thread (a request goroutine coming
// back from the driver among them), and how much the garbage collector
// ran. A tail the SDK's own waits do not explain shows here.
type goRuntime struct {
	sched, pauses *metrics.Float64Histogram
	gcs, allocs   uint64
}

var runtimeSamples = []metrics.Sample{
	{Name: "/sched/latencies:seconds"},
	{Name: "/sched/pauses/total/gc:seconds"},
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/gc/heap/allocs:bytes"},
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
