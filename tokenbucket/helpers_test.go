package tokenbucket

import (
	"sync/atomic"
	"time"
)

// fakeClock only moves when a test says so.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() int64              { return c.ns.Load() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// countWindow steps clk through window in increments of step, taking n
// tokens as often as the bucket allows after each step, and returns how many
// acquires succeeded.
func countWindow(b *Bucket, clk *fakeClock, n float64, window, step time.Duration) int {
	got := 0
	for t := time.Duration(0); t < window; t += step {
		clk.Advance(step)
		for b.TryAcquire(n) {
			got++
		}
	}
	return got
}

// drain empties b at the current instant.
func drain(b *Bucket) {
	for b.TryAcquire(1) {
	}
	for b.TryAcquire(1e-3) {
	}
}
