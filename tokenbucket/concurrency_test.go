package tokenbucket

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentExactAdmission hammers one bucket from many goroutines while
// the test moves a fake clock one token interval at a time. After every step
// the admitted total must be exactly burst + steps: never more (the rate
// bound) and, once the goroutines catch up, never less (no lost tokens).
func TestConcurrentExactAdmission(t *testing.T) {
	const (
		workers = 32
		burst   = 50
		steps   = 2000
		rate    = 1e6 // 1 µs per token: an integer interval keeps the count exact
	)
	var clk fakeClock
	b, _ := NewBucket(rate, burst, WithClock(clk.Now))
	var admitted atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !stop.Load() {
				if b.TryAcquire(1) {
					admitted.Add(1)
				} else {
					runtime.Gosched()
				}
			}
		})
	}
	stepExactly(t, &clk, &admitted, &stop, &wg, burst, steps)
}

// TestConcurrentSetRate races acquires, reserves, refunds and rate changes.
// Whatever the interleaving, the tokens admitted may not exceed the burst
// plus the highest rate times the elapsed time.
func TestConcurrentSetRate(t *testing.T) {
	const (
		burst   = 100.0
		maxRate = 2e6
		steps   = 3000
		step    = time.Microsecond
	)
	var clk fakeClock
	b, _ := NewBucket(maxRate/2, burst, WithClock(clk.Now))
	var admittedMilli atomic.Int64 // thousandths of a token
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			n := 0.25 + float64(w)*0.5
			for !stop.Load() {
				if b.TryAcquire(n) {
					admittedMilli.Add(int64(n * 1000))
				}
				if w%4 == 0 && b.Reserve(n) == 0 {
					admittedMilli.Add(int64(n * 1000))
				} else if w%4 == 0 {
					b.Refund(n) // give back a reservation not yet due
				}
				// Yield, or on two cores the clock-moving goroutine waits a
				// whole preemption slice (10 ms) per step.
				runtime.Gosched()
			}
		})
	}
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			if err := b.SetRate(maxRate / float64(1+i%4)); err != nil {
				t.Error(err)
				return
			}
			runtime.Gosched()
		}
	})
	for range steps {
		clk.Advance(step)
		runtime.Gosched()
	}
	stop.Store(true)
	wg.Wait()
	got := float64(admittedMilli.Load()) / 1000
	limit := burst + maxRate*(steps*step).Seconds()
	if got > limit+1e-6 {
		t.Fatalf("admitted %v tokens, limit burst+maxRate*elapsed = %v", got, limit)
	}
	if got == 0 || math.IsNaN(got) {
		t.Fatalf("admitted %v tokens", got)
	}
	t.Logf("admitted %.0f of at most %.0f tokens", got, limit)
}
