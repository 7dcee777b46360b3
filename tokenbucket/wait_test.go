package tokenbucket

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// hangGuard is how long a test waits for something that should happen
// promptly before declaring a hang. It is a deadlock detector, not a speed
// assertion.
const hangGuard = 10 * time.Second

// waitResult runs fn in a goroutine and returns a channel with its error.
func waitResult(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

// untilReserved blocks until b's state differs from before, i.e. a
// concurrent Wait has made its reservation.
func untilReserved(t *testing.T, b *Bucket, before int64) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for b.state.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("Wait never reserved")
		}
		runtime.Gosched()
	}
}

func TestWaitCancelRefunds(t *testing.T) {
	// 3 ms is a timer (blocking) wait; 40 µs is a spinning wait.
	for _, owed := range []float64{3, 0.04} {
		var clk fakeClock // frozen: the tokens never come due
		b, _ := NewBucket(1000, 5, WithClock(clk.Now))
		drain(b)
		before := b.state.Load()
		ctx, cancel := context.WithCancel(context.Background())
		done := waitResult(func() error { return b.Wait(ctx, owed) })
		untilReserved(t, b, before)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait(%v) after cancel = %v, want context.Canceled", owed, err)
			}
		case <-time.After(hangGuard):
			t.Fatalf("Wait(%v) did not return after cancel", owed)
		}
		// Without the refund the next token would be due at owed+1 ms.
		clk.Advance(time.Millisecond)
		if !b.TryAcquire(1) {
			t.Errorf("Wait(%v) kept its reservation after cancel", owed)
		}
	}
}

func TestWaitDeadline(t *testing.T) {
	var clk fakeClock
	b, _ := NewBucket(1000, 1, WithClock(clk.Now))
	drain(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if err := b.Wait(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
	clk.Advance(time.Millisecond)
	if !b.TryAcquire(1) {
		t.Error("expired Wait kept its reservation")
	}
}

func TestWaitAlreadyCancelledTakesNothing(t *testing.T) {
	var clk fakeClock
	b, _ := NewBucket(1000, 10, WithClock(clk.Now))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Wait(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if !b.TryAcquire(10) {
		t.Error("cancelled Wait took tokens")
	}
}

func TestWaitInvalidAmount(t *testing.T) {
	b, _ := NewBucket(1000, 10)
	if err := b.Wait(context.Background(), nan()); !errors.Is(err, ErrInvalidAmount) {
		t.Errorf("Wait(NaN) = %v, want ErrInvalidAmount", err)
	}
}

// Wait must return once the (fake) clock reaches the due time, on both the
// spinning and the timer path.
func TestWaitReturnsWhenDue(t *testing.T) {
	for _, n := range []float64{0.05, 2} { // 50 µs spin, 2 ms timer
		var clk fakeClock
		b, _ := NewBucket(1000, 2, WithClock(clk.Now))
		drain(b)
		before := b.state.Load()
		done := waitResult(func() error { return b.Wait(context.Background(), n) })
		untilReserved(t, b, before)
		clk.Advance(time.Duration(n * float64(time.Millisecond)))
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Wait(%v) = %v", n, err)
			}
		case <-time.After(hangGuard):
			t.Fatalf("Wait(%v) did not return once due", n)
		}
	}
}

// With the real clock, n waits of one token interval each cannot finish in
// less than (n-1) intervals. This is a lower bound set by the rate, not a
// speed assertion.
func TestWaitRealClockHonoursRate(t *testing.T) {
	b, _ := NewBucket(10_000, 1) // 100 µs per token
	start := time.Now()
	for range 20 {
		if err := b.Wait(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 19*100*time.Microsecond {
		t.Errorf("20 tokens at 10k/s in %v, want >= 1.9ms", elapsed)
	}
	// Oversized: 5 tokens from a burst of 1 must not deadlock.
	if err := b.Wait(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
}

func nan() float64 { var z float64; return z / z }
