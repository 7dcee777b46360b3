package benchstat

import (
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	ten := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	for _, c := range []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"one value, p0", []float64{7}, 0, 7},
		{"one value, p50", []float64{7}, 50, 7},
		{"one value, p100", []float64{7}, 100, 7},
		{"p0 is the minimum", ten, 0, 1},
		{"p10 of ten", ten, 10, 1},
		{"p11 of ten rounds up", ten, 11, 2},
		{"p50 of ten", ten, 50, 5},
		{"p90 of ten", ten, 90, 9},
		{"p99 of ten is the maximum", ten, 99, 10},
		{"p100 is the maximum", ten, 100, 10},
		{"p50 of two", []float64{1, 2}, 50, 1},
		{"p99 of a hundred", hundred, 99, 99},
		{"p99.9 of a hundred", hundred, 99.9, 100},
		{"ties", []float64{3, 3, 3, 9}, 75, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Percentile(c.sorted, c.p); got != c.want {
				t.Errorf("Percentile(%v, %v) = %v; want %v", c.sorted, c.p, got, c.want)
			}
		})
	}
	for _, c := range []struct {
		name   string
		sorted []float64
		p      float64
	}{
		{"empty", nil, 50},
		{"negative p", ten, -1},
		{"p above 100", ten, 101},
		{"NaN p", ten, math.NaN()},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Percentile(c.sorted, c.p); !math.IsNaN(got) {
				t.Errorf("Percentile(%v, %v) = %v; want NaN", c.sorted, c.p, got)
			}
		})
	}
}
