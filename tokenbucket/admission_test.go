package tokenbucket

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A wait that cannot end before the deadline fails at once, takes nothing,
// and says why, as golang.org/x/time/rate does.
func TestStreamWaitDeadlineFailsFast(t *testing.T) {
	l, _ := newSmall(t, 0.001) // clock frozen; 1 token per ms
	s := newStream(t, l, 1)
	drainStream(s)
	devBefore, strBefore := l.device.state.Load(), s.bucket.state.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Wait(ctx, 1000) // due in about a second
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "would exceed context deadline") {
		t.Fatalf("Wait = %v, want DeadlineExceeded saying it would exceed the deadline", err)
	}
	if d := time.Since(start); d > 45*time.Millisecond {
		t.Errorf("Wait took %v to refuse; want at once", d)
	}
	if l.device.state.Load() != devBefore || s.bucket.state.Load() != strBefore {
		t.Error("refused Wait kept tokens")
	}
}

func TestBucketWaitDeadlineFailsFast(t *testing.T) {
	var clk fakeClock
	b, _ := NewBucket(10, 1, WithClock(clk.Now)) // a token per 100 ms
	drain(b)
	before := b.state.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := b.Wait(ctx, 1); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "would exceed") {
		t.Fatalf("Wait = %v, want DeadlineExceeded at once", err)
	}
	if time.Since(start) > 45*time.Millisecond {
		t.Error("Wait did not refuse at once")
	}
	if b.state.Load() != before {
		t.Error("refused Wait kept tokens")
	}
}

// blockedWaiter starts a Wait on s that cannot finish under the frozen
// clock and returns its result channel once it has reserved.
func blockedWaiter(t *testing.T, l *Limiter, s *Stream, cost float64) <-chan error {
	t.Helper()
	first := waitsOn(s)
	before := first.state.Load()
	done := waitResult(func() error { return s.Wait(context.Background(), cost) })
	untilReserved(t, first, before)
	return done
}

// waitsOn is the bucket a wait on s reserves on first: a share-1 stream is
// charged on the device bucket only.
func waitsOn(s *Stream) *Bucket {
	if s.twoTier() {
		return s.bucket
	}
	return s.l.device
}

func within(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("%s: waiter not woken", what)
		return nil
	}
}

func TestStreamCloseWakesWaiter(t *testing.T) {
	l, _ := newSmall(t, 0.001)
	s := newStream(t, l, 1)
	drainStream(s)
	done := blockedWaiter(t, l, s, 100)
	s.Close()
	if err := within(t, done, "Stream.Close"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait = %v, want ErrClosed", err)
	}
	if l.device.owed.Load() != 0 {
		t.Error("woken waiter left debt owed")
	}
}

func TestLimiterCloseWakesWaiters(t *testing.T) {
	l, _ := newSmall(t, 0.001)
	a, b := newStream(t, l, 1), newStream(t, l, 1)
	drainStream(a)
	drainStream(b)
	da, db := blockedWaiter(t, l, a, 100), blockedWaiter(t, l, b, 100)
	l.Close()
	for _, d := range []<-chan error{da, db} {
		if err := within(t, d, "Limiter.Close"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait = %v, want ErrClosed", err)
		}
	}
	if a.TryAcquire(1) || a.Wait(context.Background(), 1) == nil {
		t.Error("closed limiter's stream admitted a launch")
	}
}

// A waiter reserved under a low rate re-evaluates when the rate rises: it
// is admitted at the new due time, long before the old one.
func TestSetSMLimitWakesWaiter(t *testing.T) {
	l, clk := newSmall(t, 0.01) // capacity 1000, 10 tokens/ms
	s := newStream(t, l, 1)
	drainStream(s)
	done := blockedWaiter(t, l, s, 10) // due in 1 ms at 10 tokens/ms... of stream and device
	_ = done
	if err := l.SetSMLimit(1); err != nil { // 1000 tokens/ms
		t.Fatal(err)
	}
	// At the new rate the whole backlog (kept in tokens) drains in 10 us.
	clk.Advance(20 * time.Microsecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("waiter kept its old due time after the rate rose")
	}
}

// drainStream empties a stream's bucket and the device bucket.
func drainStream(s *Stream) {
	drain(s.bucket)
	drain(s.l.device)
}

// One clock read per admission on the path that does not wait.
func TestStreamAdmissionReadsClockOnce(t *testing.T) {
	var reads atomic.Int64
	var clk fakeClock
	l, err := New(Config{SMs: 1, ThreadsPerSM: 1000, SMLimit: 1, Clock: func() int64 { reads.Add(1); return clk.Now() }})
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(t, l, 1)
	for name, admit := range map[string]func() error{
		"Wait": func() error { return s.Wait(context.Background(), 1) },
		"TryAcquire": func() error {
			if !s.TryAcquire(1) {
				return errors.New("refused")
			}
			return nil
		},
	} {
		reads.Store(0)
		if err := admit(); err != nil {
			t.Fatal(err)
		}
		if n := reads.Load(); n != 1 {
			t.Errorf("%s read the clock %d times, want 1", name, n)
		}
	}
}

// A cost far larger than the capacity is admitted when the bucket is full,
// leaves the device bucket at most one refill period past empty, and is
// charged over time: other streams keep launching (at no less than half
// their rate) instead of waiting years, while the long-run total stays
// exact.
func TestBoundedDebt(t *testing.T) {
	l, clk := newSmall(t, 1) // capacity 1000 tokens per 1 ms period
	a, b := newStream(t, l, 1), newStream(t, l, 1)
	const huge = 1e6 // a thousand periods
	if !a.TryAcquire(huge) {
		t.Fatal("oversized cost refused by full buckets")
	}
	p := l.device.params.Load()
	if backlog := l.device.state.Load() >> genBits; backlog > p.limit || p.limit != p.tau+int64(time.Millisecond) {
		t.Fatalf("backlog %v past limit %v (tau %v + one period)", time.Duration(backlog), time.Duration(p.limit), time.Duration(p.tau))
	}
	// Stream b launches 100-token kernels for 20 periods; each pays at most
	// double while the debt is repaid.
	got := 0
	for range 200 {
		clk.Advance(100 * time.Microsecond)
		for b.TryAcquire(100) {
			got++
		}
	}
	if got < 90 || got > 110 { // about half of the 200 it would get with no debt
		t.Errorf("stream b admitted %d launches in 20 periods, want about 100 (half rate while repaying)", got)
	}
	// The total is exact: owed + backlog account for every token charged.
	charged := huge + float64(got)*100
	owed := float64(l.device.owed.Load()) / p.nsPerToken
	backlog := float64(l.device.state.Load()>>genBits-(clk.Now()-l.device.start)) / p.nsPerToken
	paid := float64(clk.Now()-l.device.start) / p.nsPerToken // refilled since the (full) start
	if d := charged - (owed + backlog + paid); d > 1 || d < -1 {
		t.Errorf("charged %v != owed %v + backlog %v + refilled %v", charged, owed, backlog, paid)
	}
}

// Cancel gives back exactly what Reserve took, including debt owed.
func TestReservationCancelExact(t *testing.T) {
	l, clk := newSmall(t, 1)
	s := newStream(t, l, 1)
	drainStream(s)
	type snap struct{ ds, do, ss, so int64 }
	take := func() snap {
		return snap{l.device.state.Load(), l.device.owed.Load(), s.bucket.state.Load(), s.bucket.owed.Load()}
	}
	before := take()
	for _, cost := range []float64{50, 5000} {
		r := s.Reserve(cost)
		if !r.OK() || r.Delay() <= 0 {
			t.Fatalf("Reserve(%v) = ok %v delay %v, want a future reservation", cost, r.OK(), r.Delay())
		}
		r.Cancel()
		r.Cancel() // once only
		if after := take(); after != before {
			t.Errorf("Reserve(%v)+Cancel: %+v, want %+v", cost, after, before)
		}
	}
	r := s.Reserve(50)
	clk.Advance(r.Delay())
	if err := r.Wait(context.Background()); err != nil {
		t.Fatalf("due reservation: %v", err)
	}
	if err := r.Wait(context.Background()); !errors.Is(err, ErrReservationUsed) {
		t.Errorf("second Wait = %v, want ErrReservationUsed", err)
	}
	s.Close()
	if s.Reserve(1).OK() {
		t.Error("closed stream reserved")
	}
}
