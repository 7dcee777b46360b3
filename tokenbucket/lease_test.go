package tokenbucket

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newLeaseLimiter: 1000 tokens of burst, one token a microsecond, cost 1
// a token, on a fake clock.
func newLeaseLimiter(t *testing.T) (*Limiter, *fakeClock) {
	t.Helper()
	clk := new(fakeClock)
	l, err := New(Config{SMs: 1, ThreadsPerSM: 1000, SMLimit: 1, Dampening: 1, Penalty: NoPenalty, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// The only stream admits from a lease: one CAS on its own word, which also
// counts; the device bucket is not touched until the lease runs out.
func TestLeaseAdmitsOnTheStreamsWord(t *testing.T) {
	l, _ := newLeaseLimiter(t)
	s := newStream(t, l, 1)
	if !s.TryAcquire(1) {
		t.Fatal("refused with a full bucket")
	}
	if l.ls.cur.Load() == nil {
		t.Fatal("no lease after the first admission of the only stream")
	}
	dev := l.device.state.Load()
	for range 100 {
		if !s.TryAcquire(1) {
			t.Fatal("refused within the lease")
		}
	}
	if l.device.state.Load() != dev {
		t.Error("admissions within the lease charged the device bucket")
	}
	if got := s.Stats().Admitted; got != 101 {
		t.Errorf("Admitted = %d; want 101", got)
	}
	// The burst is exact: 1000 tokens in all, then a refusal.
	n := 101
	for s.TryAcquire(1) {
		n++
	}
	if n != 1000 {
		t.Errorf("admitted %d tokens at one instant; want the burst, 1000", n)
	}
	if got := s.Stats(); got.Admitted != 1000 || got.Rejected != 1 {
		t.Errorf("Stats = %+v; want 1000 admitted, 1 rejected", got)
	}
}

// A lease never holds tokens back: a second stream, and the owner's own
// waits, reservations and adjustments, find everything the tenant holds.
func TestLeaseHoldsNothingBack(t *testing.T) {
	l, clk := newLeaseLimiter(t)
	a := newStream(t, l, 1)
	for range 10 {
		a.TryAcquire(1)
	}
	// 990 left, part of them in a's lease.
	r := a.Reserve(990)
	if r.Delay() != 0 {
		t.Errorf("Reserve(990) with 990 tokens left: delay %v; want 0", r.Delay())
	}
	r.Cancel()
	if err := a.Wait(context.Background(), 990); err != nil {
		t.Fatal(err)
	}
	if a.TryAcquire(0.5) {
		t.Error("admitted past the burst")
	}
	clk.Advance(100 * time.Microsecond) // 100 tokens
	for range 5 {
		a.TryAcquire(1) // a lease again
	}
	b := newStream(t, l, 1) // two streams: a's lease goes back
	if l.ls.cur.Load() != nil {
		t.Fatal("a lease outlived the second stream's arrival")
	}
	if !b.TryAcquire(95) {
		t.Error("the second stream did not find the 95 tokens the tenant held")
	}
	if got := a.Stats().Admitted; got != 16 {
		t.Errorf("a admitted %d; want 16 (10, the wait, 5)", got)
	}
}

// A lease drains with time as the device's backlog does: tokens leased
// and left unused are not there twice once the bucket refills.
func TestLeaseDoesNotOutliveItsTime(t *testing.T) {
	l, clk := newLeaseLimiter(t)
	s := newStream(t, l, 1)
	s.TryAcquire(1) // leases up to an eighth of the burst
	clk.Advance(time.Second)
	n := 0
	for s.TryAcquire(1) {
		n++
	}
	if n != 1000 {
		t.Errorf("admitted %d after a full refill; want the burst, 1000", n)
	}
}

// A rate change stops the lease at once: what it held is given back,
// converted to the new rate.
func TestLeaseAcrossSetSMLimit(t *testing.T) {
	l, _ := newLeaseLimiter(t)
	s := newStream(t, l, 1)
	for range 10 {
		s.TryAcquire(1)
	}
	if err := l.SetSMLimit(0.5); err != nil {
		t.Fatal(err)
	}
	n := 10
	for s.TryAcquire(1) {
		n++
	}
	if n != 1000 {
		t.Errorf("admitted %d in all at one instant across the change; want the burst, 1000", n)
	}
}

// Many goroutines on the only stream while the test moves a fake clock one
// token interval at a time: exactly burst + steps admitted, never more
// and, once the goroutines catch up, never less, and Stats agrees. Run
// with -race.
func TestLeaseStormIsExact(t *testing.T) {
	const (
		workers = 16
		burst   = 50
		steps   = 1000
	)
	var clk fakeClock
	l, err := New(Config{SMs: 1, ThreadsPerSM: burst, SMLimit: 1, RefillPeriod: 50 * time.Microsecond,
		Dampening: 1, Penalty: NoPenalty, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(t, l, 1)
	var admitted atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for !stop.Load() {
				ok := false
				if w%4 == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					ok = s.Wait(ctx, 1) == nil // fails at once: the clock does not move
					cancel()
				} else {
					ok = s.TryAcquire(1)
				}
				if ok {
					admitted.Add(1)
				} else {
					runtime.Gosched()
				}
			}
		})
	}
	waitFor := func(want int64) {
		deadline := time.Now().Add(hangGuard)
		for admitted.Load() < want && time.Now().Before(deadline) {
			runtime.Gosched()
		}
	}
	fail := func(format string, args ...any) {
		stop.Store(true)
		wg.Wait()
		t.Fatalf(format, args...)
	}
	waitFor(burst)
	for i := 1; i <= steps; i++ {
		clk.Advance(time.Microsecond)
		want := int64(burst + i)
		waitFor(want)
		if got := admitted.Load(); got != want {
			fail("after %d intervals admitted %d, want exactly %d", i, got, want)
		}
	}
	stop.Store(true)
	wg.Wait()
	if got := admitted.Load(); got != burst+steps {
		t.Fatalf("admitted %d, want %d", got, burst+steps)
	}
	if got := s.Stats().Admitted; got != burst+steps {
		t.Fatalf("Stats().Admitted = %d, want %d", got, burst+steps)
	}
}
