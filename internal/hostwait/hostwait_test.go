package hostwait

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

func openStream(t *testing.T) (*fake.Driver, cuda.Context, cuda.Stream) {
	t.Helper()
	drv, ctx, s, err := fake.OpenPrimary(fake.H200())
	if err != nil {
		t.Fatal(err)
	}
	return drv, ctx, s
}

// The adaptive wait is the driver's while few goroutines wait, and polls
// once more wait than its limit (the fake's cuStreamQuery sees held work,
// its cuStreamSynchronize does not).
func TestAdaptive(t *testing.T) {
	drv, ctx, s := openStream(t)
	drv.HoldEvents(true)
	if err := Adaptive(1000, nil)(drv, ctx, s, nil, nil); err != nil {
		t.Fatalf("a waiter under the limit: %v (it polled instead of waiting in the driver)", err)
	}
	drv.HoldEvents(false)

	// Past the limit: a wait polls, so it sees the held work.
	w := Adaptive(2, nil)
	Waiters.Add(2)
	defer Waiters.Add(-2)
	drv.HoldEvents(true)
	done := make(chan error, 1)
	go func() { done <- w(drv, ctx, s, nil, nil) }()
	select {
	case err := <-done:
		t.Fatalf("the third waiter returned %v while the work was held: it did not poll", err)
	case <-time.After(20 * time.Millisecond):
	}
	drv.HoldEvents(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A polling wait returns ErrEnded once done closes, and the work's end
// otherwise; a wait with done polls even under the adaptive limit.
func TestPollEnds(t *testing.T) {
	drv, ctx, s := openStream(t)
	drv.HoldEvents(true)
	c, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	for _, w := range []Wait{Poll(0), Poll(time.Hour), Adaptive(1000, nil)} {
		c, cancel := context.WithTimeout(c, 5*time.Millisecond)
		if err := w(drv, ctx, s, nil, c.Done()); err != ErrEnded {
			t.Fatalf("got %v, want ErrEnded", err)
		}
		cancel()
	}
	drv.HoldEvents(false)
	if err := Poll(0)(drv, ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// For is the policy WithHostWait chose: the driver's wait where asked, a
// poll that a done channel ends otherwise.
func TestFor(t *testing.T) {
	drv, ctx, s := openStream(t)
	ended := make(chan struct{})
	close(ended)
	for _, w := range []Wait{For(false, false, 0, nil), For(true, false, time.Microsecond, nil), For(true, true, -1, nil)} {
		if err := w(drv, ctx, s, nil, nil); err != nil {
			t.Fatalf("an idle stream: %v", err)
		}
	}
	polls := drv.Calls("cuStreamQuery")
	if err := For(true, false, time.Microsecond, nil)(drv, ctx, s, nil, ended); err != nil {
		t.Fatalf("an idle stream: %v", err)
	}
	if drv.Calls("cuStreamQuery") == polls {
		t.Fatal("Poll did not poll")
	}
	syncs := drv.Calls("cuStreamSynchronize")
	_ = For(true, true, -1, nil)(drv, ctx, s, nil, ended)
	if drv.Calls("cuStreamSynchronize") != syncs+1 {
		t.Fatal("the driver's wait did not wait in the driver")
	}
}

// Within returns f's error, or ctx's once it ends; f runs to its end
// either way, even where ctx had ended before the call.
func TestWithin(t *testing.T) {
	boom := errors.New("boom")
	if err := Within(context.Background(), func() error { return boom }); err != boom {
		t.Fatalf("Within = %v; want f's error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	release, ran := make(chan struct{}), make(chan struct{})
	go func() { time.Sleep(time.Millisecond); cancel() }()
	if err := Within(ctx, func() error { <-release; close(ran); return nil }); err != context.Canceled {
		t.Fatalf("Within = %v; want ctx's error", err)
	}
	close(release)
	<-ran // f went on after Within returned
	ran2 := make(chan struct{})
	if err := Within(ctx, func() error { close(ran2); return boom }); err != context.Canceled {
		t.Fatalf("an ended ctx: Within = %v", err)
	}
	<-ran2 // started all the same
}

// Bounded: an ended ctx runs nothing; a ctx that never ends waits here
// with no done channel; a wait ended by ctx answers ctx's error; a wait
// run aside is left running when ctx ends.
func TestBounded(t *testing.T) {
	calls := 0
	count := func(done <-chan struct{}) error {
		calls++
		if done != nil {
			t.Error("a ctx that never ends handed a done channel")
		}
		return nil
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Bounded(ended, false, count); err != context.Canceled || calls != 0 {
		t.Fatalf("an ended ctx: %v, %d calls", err, calls)
	}
	if err := Bounded(context.Background(), false, count); err != nil || calls != 1 {
		t.Fatalf("a ctx that never ends: %v, %d calls", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(time.Millisecond); cancel() }()
	polled := func(done <-chan struct{}) error {
		<-done
		return ErrEnded
	}
	if err := Bounded(ctx, false, polled); err != context.Canceled {
		t.Fatalf("a polled wait ended by ctx: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	release, ran := make(chan struct{}), make(chan struct{})
	go func() { time.Sleep(time.Millisecond); cancel() }()
	aside := func(done <-chan struct{}) error {
		if done != nil {
			t.Error("a wait run aside handed a done channel")
		}
		<-release
		close(ran)
		return nil
	}
	if err := Bounded(ctx, true, aside); err != context.Canceled {
		t.Fatalf("a wait aside: %v", err)
	}
	close(release)
	<-ran
	boom := errors.New("boom")
	if err := Bounded(context.Background(), true, func(<-chan struct{}) error { return boom }); err != boom {
		t.Fatalf("Bounded = %v; want the wait's error", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	if err := Bounded(ctx, false, func(<-chan struct{}) error { return boom }); err != boom {
		t.Fatalf("Bounded = %v; want the wait's error", err)
	}
}
