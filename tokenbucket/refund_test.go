package tokenbucket

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// A cancelled Wait gives back exactly what it took, also for fractional
// amounts whose nanosecond charge was rounded up (issue 20, item 14): the
// bucket then admits as much as a twin bucket that never saw the waits.
func TestCancelledFractionalWaitsGiveBackExactly(t *testing.T) {
	for _, rate := range []float64{1000, 3000, 7000} {
		var clk fakeClock
		b, _ := NewBucket(rate, 10, WithClock(clk.Now))
		twin, _ := NewBucket(rate, 10, WithClock(clk.Now))
		if !b.TryAcquire(10) || !twin.TryAcquire(10) {
			t.Fatal("full bucket refused 10")
		}
		for _, n := range []float64{0.3, 2.0, 3.7} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			err := b.Wait(ctx, n) // the frozen clock never makes the tokens due
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait(%v) = %v, want DeadlineExceeded", n, err)
			}
		}
		// Just enough time for the twin to admit 7 more: a nanosecond
		// kept by the refunds would leave b one token short.
		ns := 1e9 / rate
		clk.Advance(time.Duration(math.Ceil(10*ns) + 7*math.Ceil(ns) - math.Floor(10*ns)))
		got, want := 0, 0
		for b.TryAcquire(1) {
			got++
		}
		for twin.TryAcquire(1) {
			want++
		}
		if got != want || want != 7 {
			t.Fatalf("rate %v: %d tokens available after three cancelled waits, the twin bucket has %d", rate, got, want)
		}
	}
}
