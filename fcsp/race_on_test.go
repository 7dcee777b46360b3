//go:build race

package fcsp

// raceEnabled: the race detector makes sync.Pool drop a quarter of what is
// put back, so a pooled value is sometimes made anew: allocation counts
// that rest on a sync.Pool are checked without it.
const raceEnabled = true
