package tokenbucket

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
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

// newMicroLimiter is a limiter of burst tokens that refills one token a
// microsecond, exactly (burst tokens a refill period of burst us), with
// launch costs of one token a thread, on a clock that moves when told.
func newMicroLimiter(t *testing.T, burst int) (*Limiter, *fakeClock) {
	t.Helper()
	clk := new(fakeClock)
	l, err := New(Config{SMs: 1, ThreadsPerSM: burst, SMLimit: 1, RefillPeriod: time.Duration(burst) * time.Microsecond,
		Dampening: 1, Penalty: NoPenalty, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// count takes cost from s as often as it admits at the current instant.
func count(s *Stream, cost float64) int {
	n := 0
	for s.TryAcquire(cost) {
		n++
	}
	return n
}

// drain empties b at the current instant.
func drain(b *Bucket) {
	for b.TryAcquire(1) {
	}
	for b.TryAcquire(1e-3) {
	}
}

// stepExactly runs the check of the exact-admission storms: once the
// storm's goroutines (in wg, stopped by stop) have taken the burst, it moves
// clk one token interval (1 us) at a time and requires exactly one more
// admission per interval: never more (the rate bound) and, once the
// goroutines catch up, never less (no lost tokens). It stops the storm
// before it returns or fails.
func stepExactly(t *testing.T, clk *fakeClock, admitted *atomic.Int64, stop *atomic.Bool, wg *sync.WaitGroup, burst, steps int64) {
	t.Helper()
	waitFor := func(want int64) {
		deadline := time.Now().Add(hangGuard)
		for admitted.Load() < want && time.Now().Before(deadline) {
			runtime.Gosched()
		}
	}
	waitFor(burst)
	for i := int64(1); i <= steps; i++ {
		clk.Advance(time.Microsecond)
		want := burst + i
		waitFor(want)
		if got := admitted.Load(); got != want {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("after %d intervals admitted %d, want exactly %d", i, got, want)
		}
	}
	stop.Store(true)
	wg.Wait()
	if got := admitted.Load(); got != burst+steps {
		t.Fatalf("admitted %d, want %d", got, burst+steps)
	}
}

// waitPriced waits on s for a cost that depends on the limit, as an
// admission that prices itself does: mark, price, wait, and on
// ErrLimitChanged mark and price again. It returns the cost it was
// admitted at.
func waitPriced(ctx context.Context, s *Stream, cost func() float64) (float64, error) {
	var w Waiting
	for {
		m := s.Mark()
		c := cost()
		err := w.Wait(ctx, s, c, m)
		if err != ErrLimitChanged {
			if err != nil {
				return 0, err
			}
			return max(c, 0), nil
		}
	}
}
