package hostwait

import (
	"context"
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
