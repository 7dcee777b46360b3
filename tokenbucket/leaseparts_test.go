package tokenbucket

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withProcs runs f with GOMAXPROCS at n: leases are cut into one part per
// two Ps, so tests of the parts need more than this machine may have.
func withProcs(t *testing.T, n int, f func()) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	f()
}

// Many goroutines hammering ONE stream, whose lease is cut into parts,
// while the test moves a fake clock one token interval at a time: exactly
// burst + steps admitted, never more (the rate and burst: parts take
// disjoint pieces of the slice) and, once the goroutines catch up, never
// less (a launch that finds its part spent tries the others, so no part
// holds tokens back), and Stats agrees. Run with -race.
func TestLeasePartsStormIsExact(t *testing.T) {
	withProcs(t, 8, func() {
		const (
			workers = 64
			burst   = 1024 // a slice of 128 tokens: 4 parts at 8 Ps
			steps   = 1000
		)
		l, clk := newMicroLimiter(t, burst)
		s := newStream(t, l, 1)
		if !s.TryAcquire(1) {
			t.Fatal("refused with a full bucket")
		}
		if ls := l.ls.cur.Load(); ls == nil || len(ls.parts) < 2 {
			t.Fatal("no lease of several parts: the test does not test them")
		}
		var admitted atomic.Int64
		admitted.Store(1)
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for !stop.Load() {
					ok := false
					if w%8 == 0 {
						// A reservation, used if due now, else cancelled: it
						// returns the lease and gives back through it. (A
						// Wait with a deadline on the frozen clock holds its
						// reservation until the deadline, and eight waiters
						// cycling keep the bucket reserved for good.)
						if r := s.Reserve(1); r.Delay() == 0 {
							ok = r.Wait(context.Background()) == nil
						} else {
							r.Cancel()
						}
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
	})
}

// A lease of several parts holds exactly its slice: at one instant the
// stream admits the burst, then refuses; after a full refill, the burst
// again (the parts' unused tokens went back when it was revoked).
func TestLeasePartsHoldTheBurstExactly(t *testing.T) {
	withProcs(t, 8, func() {
		l, clk := newMicroLimiter(t, 1024)
		s := newStream(t, l, 1)
		if got := count(s, 1); got != 1024 {
			t.Fatalf("admitted %d at one instant, want the burst, 1024", got)
		}
		clk.Advance(time.Second)
		if got := count(s, 1); got != 1024 {
			t.Fatalf("admitted %d after a full refill, want 1024", got)
		}
		// Half spent, then time moves past half of the parts: what they
		// held drained with it, never counted twice.
		l.returnLease()
		clk.Advance(time.Second)
		for range 64 {
			s.TryAcquire(1)
		}
		clk.Advance(64 * time.Microsecond)
		l.returnLease()
		if got := count(s, 1); got != 1024 {
			t.Fatalf("admitted %d once refilled, want 1024", got)
		}
	})
}

// A launch whose clock reading predates the live lease's grant (it was
// descheduled between the two) found the lease unusable at that reading
// and revoked it: young and unused, the lease looked unpaid, and no lease
// was granted for a burst's time, every launch on the device word. It now
// leaves the lease alone.
func TestStaleReadingDoesNotRevokeTheLease(t *testing.T) {
	l, clk := newLeaseLimiter(t) // 1000 tokens, 1 a us: tau 1 ms
	s := newStream(t, l, 1)
	stale := clk.Now() // a launch reads the clock, then is descheduled
	clk.Advance(2 * time.Millisecond)
	for range 300 { // the device backlog now lies past the stale reading's burst
		if !s.TryAcquire(1) {
			t.Fatal("refused with a full bucket")
		}
	}
	ls := l.ls.cur.Load()
	if ls == nil {
		t.Fatal("no lease")
	}
	if l.admitDevice(s, 1, stale) == nil && l.leased(s, 1, stale) == nil {
		t.Log("the stale launch was refused") // either way, the lease must stay
	}
	if l.ls.cur.Load() != ls {
		t.Fatal("a launch with a reading older than the lease revoked it")
	}
	if skip := l.ls.skip.Load(); skip > clk.Now()-l.device.start {
		t.Fatalf("leases held off until %d (now %d)", skip, clk.Now()-l.device.start)
	}
}

// A lease left unused by a pause of the whole process (a descheduled VM, a
// GC) looked unpaid, and the stream went without one for a burst's time:
// every launch on the device word, contended by every goroutine. Launches
// that keep coming now end that early.
func TestUnusedLeaseBackoffEndsWhenLaunchesKeepComing(t *testing.T) {
	l, clk := newLeaseLimiter(t) // 1000 tokens, 1 a us: tau 1 ms
	s := newStream(t, l, 1)
	if !s.TryAcquire(1) || l.ls.cur.Load() == nil {
		t.Fatal("no lease after the first admission")
	}
	clk.Advance(500 * time.Microsecond) // the process paused: the lease drained unused
	for i := range 2 * leaseMinUse {
		if !s.TryAcquire(1) {
			t.Fatalf("launch %d refused", i)
		}
	}
	if l.ls.cur.Load() == nil {
		t.Fatalf("no lease after %d launches at once: still backing off", 2*leaseMinUse)
	}
	if got := s.Stats().Admitted; got != 1+2*leaseMinUse {
		t.Errorf("Admitted = %d, want %d", got, 1+2*leaseMinUse)
	}
}
