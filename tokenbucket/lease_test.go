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
	n := count(s, 1)
	if n != 1000 {
		t.Errorf("admitted %d after a full refill; want the burst, 1000", n)
	}
}

// A change of limit stops the lease at once, and the tokens it held are
// tokens in hand like the others: scaled by the change (new/old), as a
// stream without a lease finds them (its own tier forced on, no lease).
func TestLeaseAcrossSetSMLimit(t *testing.T) {
	for _, f := range []float64{0.5, 0.25} {
		count := func(own bool) int {
			l, _ := newLeaseLimiter(t)
			s := newStream(t, l, 1)
			s.own = own
			for range 10 {
				s.TryAcquire(1)
			}
			if !own && l.ls.cur.Load() == nil {
				t.Fatal("no lease before the change")
			}
			if err := l.SetSMLimit(f); err != nil {
				t.Fatal(err)
			}
			if l.ls.cur.Load() != nil {
				t.Fatal("a lease outlived the change of limit")
			}
			n := 10
			for s.TryAcquire(1) {
				n++
			}
			return n
		}
		if got, want := count(false), count(true); got != want {
			t.Errorf("limit 1 -> %v: %d admitted in all at one instant with a lease; %d without", f, got, want)
		}
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
	l, clk := newMicroLimiter(t, burst)
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
	stepExactly(t, clk, &admitted, &stop, &wg, burst, steps)
	if got := s.Stats().Admitted; got != burst+steps {
		t.Fatalf("Stats().Admitted = %d, want %d", got, burst+steps)
	}
}

// Hostile timing around a lease: launches on the only stream while other
// goroutines reserve and cancel, adjust up and down, wait with deadlines
// that fail at once, and open and close a second stream (which revokes the
// lease). The tenant never admits more than burst + the tokens refilled,
// and once the churn stops and the bucket refills nothing is held back:
// exactly the burst is there. Run with -race.
func TestLeaseChurnNeverOverAdmits(t *testing.T) {
	const (
		burst = 50
		steps = 400
	)
	l, clk := newMicroLimiter(t, burst)
	s := newStream(t, l, 1)
	var launched atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for !stop.Load() {
				if s.TryAcquire(1) {
					launched.Add(1)
				} else {
					runtime.Gosched()
				}
			}
		})
	}
	churn := []func(){
		func() { s.Reserve(3).Cancel() },
		func() { s.Adjust(2); s.Adjust(-2) },
		func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			if s.Wait(ctx, 40) == nil {
				launched.Add(40)
			}
			cancel()
		},
		func() {
			if o, err := l.NewStream(1); err == nil {
				o.Close()
			}
		},
	}
	for _, f := range churn {
		wg.Go(func() {
			for !stop.Load() {
				f()
				runtime.Gosched()
			}
		})
	}
	for i := 1; i <= steps; i++ {
		clk.Advance(time.Microsecond)
		for range 20 {
			runtime.Gosched()
		}
		if got := launched.Load(); got > int64(burst+i) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("after %d intervals %d tokens launched; at most %d may be", i, got, burst+i)
		}
	}
	stop.Store(true)
	wg.Wait()
	l.returnLease()
	clk.Advance(time.Second)
	n := count(s, 1)
	if n != burst {
		t.Errorf("after the churn and a full refill %d tokens at one instant; want the burst, %d", n, burst)
	}
}

// A refund that reaches the device bucket while a lease is live (one that
// raced past the owner's returnLease: a reservation made before the grant
// and cancelled after it) must not lower the TAT into the lease's slice:
// the slice would then outlast the backlog it was charged in, and the
// tenant would get its tokens twice. The refund stops at the slice, and
// what it could not give is given once the lease is returned.
func TestRefundNeverReachesIntoALiveLease(t *testing.T) {
	l, clk := newLeaseLimiter(t) // burst 1000, a token a microsecond
	s := newStream(t, l, 1)
	_, _, k := l.device.reserveAt(100, clk.Now()) // before the lease
	if !s.TryAcquire(1) || l.ls.cur.Load() == nil {
		t.Fatal("no lease granted")
	}
	l.giveBackDevice(k) // the cancel, after the grant
	clk.Advance(110 * time.Microsecond)
	// 1 launched at 0, the reservation given back, 110 us refilled: full.
	n := count(s, 1)
	if n != 1000 {
		t.Errorf("%d tokens at one instant 110 us later; want the burst, 1000", n)
	}
}

// A debt left on the device bucket by a direct charge since the grant (a
// launch that did not wait for a renewal) holds the lease back as it holds
// back any launch.
func TestLeaseHonoursADebt(t *testing.T) {
	l, _ := newLeaseLimiter(t)
	s := newStream(t, l, 1)
	if !s.TryAcquire(1) || l.ls.cur.Load() == nil {
		t.Fatal("no lease granted")
	}
	l.device.reserveAt(1500, l.clock()) // into debt, past the lease
	if s.TryAcquire(1) {
		t.Error("admitted from the lease while the tenant is in debt")
	}
}
