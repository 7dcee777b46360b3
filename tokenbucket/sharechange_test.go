package tokenbucket

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A tenant running flat out at limit 1 keeps its bucket full (each launch's
// refill replaces what it took). Lowering the limit must take effect within
// one refill period: the allowance carried over is the new limit's, not a
// whole period of the old one (which took 1/(1-f) periods to drain).
func TestSetSMLimitDownLagWithinOnePeriod(t *testing.T) {
	for _, f := range []float64{0.25, 0.5} {
		l, clk := newSmall(t, 1) // 1000 tokens, 1000 tokens/ms at limit 1: period 1 ms
		s := newStream(t, l, 1)
		const cost, step = 100, 100 * time.Microsecond // each launch is 0.1 period of work, paced by the GPU
		for i := range 50 {
			clk.Advance(step)
			if !s.TryAcquire(cost) {
				t.Fatalf("launch %d refused at limit 1", i)
			}
		}
		if err := l.SetSMLimit(f); err != nil {
			t.Fatal(err)
		}
		var lag time.Duration
		for s.TryAcquire(cost) {
			clk.Advance(step)
			lag += step
			if lag > 20*time.Millisecond {
				t.Fatalf("limit %v: still admitting at full pace after %v", f, lag)
			}
		}
		if lag > time.Millisecond {
			t.Errorf("limit 1 -> %v: first refusal %v after the change, want at most one refill period (1ms)", f, lag)
		}
		// And then the new limit holds: over 10 periods at most f of them
		// plus the burst.
		got := 0
		for range 100 {
			clk.Advance(step)
			for s.TryAcquire(cost) {
				got++
			}
		}
		if want := 10 * f * 1000 / cost; float64(got) > want+1 || float64(got) < want-1 {
			t.Errorf("limit %v: %d launches in 10 periods, want %v", f, got, want)
		}
	}
}

// Tokens in hand scale with the limit, both ways, capped at the burst;
// debt is work already admitted and is kept.
func TestSetSMLimitScalesTokensKeepsDebt(t *testing.T) {
	l, clk := newSmall(t, 0.5)
	s := newStream(t, l, 1)
	// Full at 0.5 (1000 tokens) -> 0.25: 500 tokens.
	if err := l.SetSMLimit(0.25); err != nil {
		t.Fatal(err)
	}
	if !s.TryAcquire(500) || s.TryAcquire(1) {
		t.Fatal("after 0.5 -> 0.25 a full bucket should hold 500 tokens")
	}
	// 100 tokens refill in 0.4 ms at 0.25; 0.25 -> 0.5 doubles them.
	clk.Advance(400 * time.Microsecond)
	if err := l.SetSMLimit(0.5); err != nil {
		t.Fatal(err)
	}
	if !s.TryAcquire(200) || s.TryAcquire(1) {
		t.Fatal("after 0.25 -> 0.5 a bucket holding 100 tokens should hold 200")
	}
	// Debt: reserve 300 more than there is; raising the limit keeps it,
	// repaid at the new rate (1000 tokens/ms at 1: 0.3 ms).
	if d := s.Reserve(300); d.Delay() == 0 {
		t.Fatal("reservation into debt was due at once")
	}
	if err := l.SetSMLimit(1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(299 * time.Microsecond)
	if s.TryAcquire(2) {
		t.Fatal("debt was forgiven by the change of limit")
	}
	clk.Advance(2 * time.Microsecond)
	if !s.TryAcquire(1) {
		t.Fatal("debt not repaid at the new rate")
	}
}

// A launch waiting when the limit rises is charged its cost at the new
// limit: here the cost falls to 0 at limit 1 (as a GPU share's does), so
// it is admitted at once on a clock that never moves. Wait, with the cost
// fixed at the old limit's, would wait for tokens forever.
func TestSetSMLimitUpRecomputesWaiterCost(t *testing.T) {
	l, clk := newSmall(t, 0.25)
	s := newStream(t, l, 1)
	drainStream(s)
	cost := func() float64 {
		if l.SMLimit() >= 1 {
			return 0
		}
		return 100
	}
	type result struct {
		cost float64
		err  error
	}
	before := waitsOn(s).state.Load()
	done := make(chan result, 1)
	go func() {
		c, err := waitPriced(context.Background(), s, cost)
		done <- result{c, err}
	}()
	untilReserved(t, waitsOn(s), before)
	if err := l.SetSMLimit(1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.cost != 0 {
			t.Fatalf("Waiting.Wait = %v, %v; want 0, nil (the cost at the new limit)", r.cost, r.err)
		}
	case <-time.After(hangGuard):
		t.Fatal("waiter kept its old cost after the limit rose")
	}
	if st := s.Stats(); st.Admitted != 1 || st.Throttled != 1 {
		t.Errorf("Admitted %d, Throttled %d; want 1 and 1 (it waited, then went free)", st.Admitted, st.Throttled)
	}

	// A cost that changes but stays positive is charged at its new value,
	// and the stream counts the admission and its wait once, however
	// many times it was priced.
	if err := l.SetSMLimit(0.5); err != nil {
		t.Fatal(err)
	}
	drainStream(s)
	before = waitsOn(s).state.Load()
	go func() {
		c, err := waitPriced(context.Background(), s, func() float64 { return 100 * (1 + (1 - l.SMLimit())) })
		done <- result{c, err}
	}()
	untilReserved(t, waitsOn(s), before)
	if err := l.SetSMLimit(1); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		clk.Advance(10 * time.Microsecond)
		select {
		case r := <-done:
			if r.err != nil || r.cost != 100 {
				t.Fatalf("Waiting.Wait = %v, %v; want 100 (the cost at limit 1), nil", r.cost, r.err)
			}
			if st := s.Stats(); st.Admitted != 2 || st.Throttled != 2 {
				t.Errorf("Admitted %d, Throttled %d; want 2 and 2 (one wait, priced twice, is one)", st.Admitted, st.Throttled)
			}
			return
		case <-time.After(time.Millisecond):
		}
		if i > 1000 {
			t.Fatal("waiter not admitted")
		}
	}
}

func TestWaitingBadInput(t *testing.T) {
	l, _ := newSmall(t, 0.5)
	s := newStream(t, l, 1)
	for _, c := range []float64{nan(), math.Inf(1)} {
		if _, err := waitPriced(context.Background(), s, func() float64 { return c }); !errors.Is(err, ErrInvalidAmount) {
			t.Errorf("Waiting.Wait(%v) = %v, want ErrInvalidAmount", c, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := waitPriced(ctx, s, func() float64 { return 1 }); !errors.Is(err, context.Canceled) {
		t.Errorf("Waiting.Wait on a done ctx = %v", err)
	}
	s.Close()
	if _, err := waitPriced(context.Background(), s, func() float64 { return 1 }); !errors.Is(err, ErrClosed) {
		t.Errorf("Waiting.Wait on a closed stream = %v, want ErrClosed", err)
	}
}

// Hostile timing: changes of limit race waiting launches and Close. Every
// waiter returns (admitted or ErrClosed), and afterwards the buckets are
// sane: given time they are exactly full again, nothing owed.
func TestSetSMLimitRacesWaitersAndClose(t *testing.T) {
	l, clk := newSmall(t, 0.25)
	streams := []*Stream{newStream(t, l, 1), newStream(t, l, 0.5)}
	cost := func() float64 {
		if l.SMLimit() >= 1 {
			return 0
		}
		return 300
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		s := streams[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var err error
				if i%4 == 0 {
					err = s.Wait(context.Background(), 300)
				} else {
					_, err = waitPriced(context.Background(), s, cost)
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Add(1)
	go func() { // the clock moves, so waiters get through
		defer ticker.Done()
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(50 * time.Microsecond)
				time.Sleep(10 * time.Microsecond)
			}
		}
	}()
	for i := range 200 {
		if err := l.SetSMLimit([]float64{1, 0.25, 0.5, 0.1}[i%4]); err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			streams[1].Close() // one stream closes while the limit keeps changing
		}
	}
	l.Close()
	wg.Wait()
	close(stop)
	ticker.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Sane state: after long enough everything is repaid and full.
	clk.Advance(time.Second)
	for _, b := range []*Bucket{l.device, streams[0].bucket} {
		if o := b.owed.Load(); o != 0 {
			t.Errorf("owed %d ns after everything was repaid", o)
		}
		if !b.TryAcquire(b.Burst()) || b.TryAcquire(1e-3) {
			t.Error("bucket is not exactly full after a long idle")
		}
	}
}

// Waiting.Wait reads the clock once on an admission that need not wait,
// and not at all for a free one (a GPU share's launches at share 1).
func TestWaitingReadsClockOnce(t *testing.T) {
	var reads atomic.Int64
	var clk fakeClock
	l, err := New(Config{SMs: 1, ThreadsPerSM: 1000, SMLimit: 1, Clock: func() int64 { reads.Add(1); return clk.Now() }})
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(t, l, 1)
	for _, c := range []struct {
		cost  float64
		reads int64
	}{{1, 1}, {0, 0}} {
		reads.Store(0)
		if got, err := waitPriced(context.Background(), s, func() float64 { return c.cost }); err != nil || got != c.cost {
			t.Fatalf("Waiting.Wait(%v) = %v, %v", c.cost, got, err)
		}
		if n := reads.Load(); n != c.reads {
			t.Errorf("Waiting.Wait(%v) read the clock %d times, want %d", c.cost, n, c.reads)
		}
	}
}

// A cost priced under a mark the limiter has changed since is not waited
// for: Waiting.Wait takes nothing and says so (ErrLimitChanged), while a
// fixed cost (Stream.Wait, the zero Mark) is re-reserved as it is.
func TestWaitingRefusesAStaleMark(t *testing.T) {
	l, clk := newSmall(t, 0.5)
	s := newStream(t, l, 1)
	m := s.Mark()
	if err := l.SetSMLimit(0.25); err != nil {
		t.Fatal(err)
	}
	before := waitsOn(s).state.Load()
	var w Waiting
	if err := w.Wait(context.Background(), s, 2000, m); err != ErrLimitChanged {
		t.Fatalf("Wait with a mark from before SetSMLimit = %v, want ErrLimitChanged", err)
	}
	if waitsOn(s).state.Load() != before {
		t.Fatal("a wait refused for its stale mark took tokens")
	}
	// Waiting on a fixed cost, woken by the change, goes on waiting.
	drainStream(s)
	before = waitsOn(s).state.Load()
	done := make(chan error, 1)
	go func() { done <- s.Wait(context.Background(), 100) }()
	untilReserved(t, waitsOn(s), before)
	if err := l.SetSMLimit(0.5); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		clk.Advance(10 * time.Microsecond)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Stream.Wait across a change of limit = %v", err)
			}
			return
		case <-time.After(time.Millisecond):
		}
		if i > 1000 {
			t.Fatal("Stream.Wait not admitted after a change of limit")
		}
	}
}
