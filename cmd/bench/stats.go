package main

import (
	"math"
	"slices"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/benchstat"
)

// mean returns the arithmetic mean of xs, NaN for none.
func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// summary is a sorted sample of per-operation times in nanoseconds.
type summary []float64

func summarize(ns []float64) summary {
	s := slices.Clone(ns)
	slices.Sort(s)
	return summary(s)
}

func (s summary) mean() float64         { return mean(s) }
func (s summary) p(pct float64) float64 { return benchstat.Percentile(s, pct) }

// timeEach calls f(i) for i in [0, n) and returns each call's duration in
// nanoseconds, stopping at the first error.
func timeEach(n int, f func(i int) error) (summary, error) {
	ns := make([]float64, 0, n)
	for i := range n {
		t0 := time.Now()
		err := f(i)
		d := time.Since(t0)
		if err != nil {
			return nil, err
		}
		ns = append(ns, float64(d))
	}
	return summarize(ns), nil
}

// timePer calls f(i) for i in [0, n) and returns the mean nanoseconds per
// call, timing the loop as a whole (for calls too cheap to time singly).
func timePer(n int, f func(i int) error) (float64, error) {
	t0 := time.Now()
	for i := range n {
		if err := f(i); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(t0)) / float64(n), nil
}
