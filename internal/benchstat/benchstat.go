// Package benchstat holds the statistics the benchmark programs under cmd/
// share (cmd/bench, cmd/hotpath), so that both report percentiles the same
// way. Examples keep their own: they are copied out alone.
package benchstat

import "math"

// Percentile returns the p-th percentile (0 <= p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. It returns NaN for an empty slice or a p out of range.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 || math.IsNaN(p) || p < 0 || p > 100 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}
