package tokenbucket

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Issue 28 #8: tokens given back after a change of share must come back
// as the change would have left them had they been in the bucket when it
// was made (scaled with the tokens in hand), not as they were taken.
// Otherwise a reservation or a waiter held across the change dodges the
// rescale: lowering 0.5 -> 0.125 a full bucket holds 0.25 of a period,
// but 1.0 once a reservation that took it all before the change is
// cancelled after it.

// newShareLimiter is a GPU-share limiter (as fcsp's gpuShareLimiter): 1000
// tokens, one refill period (1 ms), at share f.
func newShareLimiter(t *testing.T, f float64) (*Limiter, *fakeClock) {
	t.Helper()
	clk := new(fakeClock)
	l, err := New(Config{SMs: 1, ThreadsPerSM: 1000, SMLimit: f, Dampening: 1, Penalty: NoPenalty, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// held counts the tokens s holds now, 5 at a time, through both tiers.
func held(s *Stream) int { return 5 * count(s, 5) }

func TestCancelAfterShareChangeIsScaled(t *testing.T) {
	for _, share := range []float64{1, 0.5} { // one tier (leased) and two
		l, _ := newShareLimiter(t, 0.5)
		s := newStream(t, l, share)
		r := s.Reserve(1000 * share) // the whole bucket, due now
		if !r.OK() || r.Delay() != 0 {
			t.Fatalf("share %v: reservation of a full bucket not due now", share)
		}
		if err := l.SetSMLimit(0.125); err != nil {
			t.Fatal(err)
		}
		r.Cancel()
		// Cancelled before the change: full (1000), scaled by 0.25.
		if got, want := held(s), int(250*share); got != want {
			t.Errorf("stream share %v: %d tokens after 0.5 -> 0.125 and the cancel, want %d (as if cancelled before)", share, got, want)
		}
	}
}

// A waiter that leaves after the change gives back what it took before it
// scaled as the tokens it came from were: it reserved 1000 with 600 in
// hand, 0.5 -> 0.125 leaves those 600 at 150, and so must its leaving.
func TestWaiterLeavingAfterShareChangeIsScaled(t *testing.T) {
	l, _ := newShareLimiter(t, 0.5)
	s := newStream(t, l, 1)
	if !s.TryAcquire(400) {
		t.Fatal("full bucket refused 400")
	}
	l.returnLease()
	ctx, cancel := context.WithCancel(context.Background())
	first := waitsOn(s)
	before := first.state.Load()
	done := waitResult(func() error { return s.Wait(ctx, 1000) }) // 400 short: waits on the frozen clock
	untilReserved(t, first, before)
	if err := l.SetSMLimit(0.125); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := within(t, done, "cancelled Wait"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want Canceled", err)
	}
	if got, want := held(s), 150; got != want {
		t.Errorf("%d tokens after the waiter left, want %d (600 in hand scaled by 0.25)", got, want)
	}
}

// A waiter in debt when the change comes gives back debt, which the change
// keeps unscaled: re-reserving under the new share costs it nothing more.
// (Scaling every give-back would make it pay 0.75 of its cost again.)
func TestWaiterInDebtAcrossShareChangeKeepsItsPlace(t *testing.T) {
	l, clk := newShareLimiter(t, 0.5)
	s := newStream(t, l, 1)
	drainStream(s)
	first := waitsOn(s)
	before := first.state.Load()
	done := waitResult(func() error { return s.Wait(context.Background(), 500) })
	untilReserved(t, first, before)
	if err := l.SetSMLimit(0.125); err != nil {
		t.Fatal(err)
	}
	// 500 tokens at 125 a ms: due 4 ms after the change, not later. The
	// clock stops there, and the waiter has until hangGuard to see it: a
	// host too busy to run it within a step's look (under -race on 2
	// cores, 8 runs in 300) must not read as a later due time.
	const step, due = 100 * time.Microsecond, 4 * time.Millisecond
	for elapsed := time.Duration(0); ; elapsed += step {
		look := 2 * time.Millisecond
		if elapsed == due {
			look = hangGuard
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		case <-time.After(look):
		}
		if elapsed >= due {
			t.Fatalf("waiter not admitted %v after the change, its cost at the new share", elapsed)
		}
		clk.Advance(step)
	}
}

// A settled launch measured below its estimate gives the difference back
// (AdjustSince a mark taken before the charge) scaled by the change of
// share since the charge.
func TestSettleAfterShareChangeIsScaled(t *testing.T) {
	for _, share := range []float64{1, 0.5} {
		l, _ := newShareLimiter(t, 0.5)
		s := newStream(t, l, share)
		m := s.Mark()
		if !s.TryAcquire(1000 * share) {
			t.Fatal("full bucket refused its burst")
		}
		if err := l.SetSMLimit(0.125); err != nil {
			t.Fatal(err)
		}
		s.AdjustSince(-1000*share, m) // measured 0: all of it back
		if got, want := held(s), int(250*share); got != want {
			t.Errorf("stream share %v: %d tokens after the settle, want %d", share, got, want)
		}
	}
}

// Give-backs across a change add up to what giving them all back before it
// would have left, in whatever order they come: here 50 in hand, R1 takes
// 100 (50 of them debt), R2 50 more; at a quarter of the share the 50 in
// hand are 12.5.
func TestGiveBacksAcrossChangeAddUp(t *testing.T) {
	for _, order := range [][2]int{{0, 1}, {1, 0}} {
		var clk fakeClock
		b, _ := NewBucket(1000, 100, WithClock(clk.Now), WithMaxDebt(time.Second))
		if !b.TryAcquire(50) {
			t.Fatal("refused 50")
		}
		var ks [2]took
		_, _, ks[0] = b.reserveAt(100, clk.Now())
		_, _, ks[1] = b.reserveAt(50, clk.Now())
		if err := b.setRate(250, 0.25); err != nil {
			t.Fatal(err)
		}
		b.giveBack(ks[order[0]])
		b.giveBack(ks[order[1]])
		if !b.TryAcquire(12.4) || b.TryAcquire(0.2) {
			t.Errorf("order %v: want 12.5 tokens after both give-backs", order)
		}
	}
}

// Across two changes the give-back is carried through both, and a rise
// scales it up as it scales the tokens in hand.
func TestGiveBackThroughSeveralChanges(t *testing.T) {
	var clk fakeClock
	b, _ := NewBucket(1000, 100, WithClock(clk.Now))
	_, _, k := b.reserveAt(100, clk.Now())
	for _, f := range []float64{0.5, 0.5} {
		if err := b.setRate(b.Rate()*f, f); err != nil {
			t.Fatal(err)
		}
	}
	b.giveBack(k)
	if !b.TryAcquire(24.9) || b.TryAcquire(0.2) {
		t.Error("100 given back through two halvings: want 25")
	}

	// Raised by a quarter: 30 in hand become 37.5; the 40 given back
	// after it come back as the 70 in hand would have become, 87.5.
	b, _ = NewBucket(1000, 100, WithClock(clk.Now))
	if !b.TryAcquire(30) {
		t.Fatal("refused 30")
	}
	_, _, k = b.reserveAt(40, clk.Now())
	if err := b.setRate(1250, 1.25); err != nil {
		t.Fatal(err)
	}
	b.giveBack(k)
	if !b.TryAcquire(87.4) || b.TryAcquire(0.2) {
		t.Error("40 given back after a rise of a quarter: want 87.5 in hand")
	}

	// Changes of rate alone (SetRate) keep the tokens, however many.
	b, _ = NewBucket(1000, 100, WithClock(clk.Now))
	_, _, k = b.reserveAt(100, clk.Now())
	for i := range 3 * (genMask + 1) {
		if err := b.SetRate(float64(1000 + i%2*1000)); err != nil {
			t.Fatal(err)
		}
	}
	b.giveBack(k)
	if !b.TryAcquire(99.9) {
		t.Error("100 taken before rate changes alone, not given back")
	}
	// However many scaling changes ago (here three times the generations
	// the state tells apart), as they would have left them: 100 halved
	// and doubled 24 times over is 100. (Carried through at most 16, they
	// came back as nothing: tokens lost, issue 56.)
	b, _ = NewBucket(1000, 100, WithClock(clk.Now))
	_, _, k = b.reserveAt(100, clk.Now())
	for i := range 3 * (genMask + 1) {
		f := []float64{0.5, 2}[i%2]
		if err := b.setRate(b.Rate()*f, f); err != nil {
			t.Fatal(err)
		}
	}
	b.giveBack(k)
	if !b.TryAcquire(99.9) || b.TryAcquire(0.2) {
		t.Error("100 given back through 48 changes that leave a full bucket full: want 100")
	}
}

// A reservation held across many changes of share (issue 56: a storm of
// SetSMLimit 0.25, 0.75, 0.5, 0.1 in turn) and then cancelled leaves the
// bucket as it would have been had it never been made: on a frozen clock
// a full bucket at 0.5 is full again at 0.75 after every turn, so raised
// to 1 it holds the whole burst. Carried through 16 changes at most, the
// cancel gave back nothing and the burst was lost for good.
func TestCancelAfterManyShareChangesLosesNothing(t *testing.T) {
	for _, turns := range []int{1, 3, 5, 50} {
		l, _ := newShareLimiter(t, 0.5)
		s := newStream(t, l, 1)
		r := s.Reserve(1000)
		if !r.OK() || r.Delay() != 0 {
			t.Fatal("reservation of a full bucket not due now")
		}
		for i := range 4 * turns {
			if err := l.SetSMLimit([]float64{0.25, 0.75, 0.5, 0.1}[i%4]); err != nil {
				t.Fatal(err)
			}
		}
		r.Cancel()
		if err := l.SetSMLimit(1); err != nil {
			t.Fatal(err)
		}
		if got := held(s); got != 1000 {
			t.Errorf("%d turns of changes: %d tokens after the cancel, want 1000 (as if never reserved)", turns, got)
		}
	}
}
