package event

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/life"
)

func primary(t *testing.T) (*fake.Driver, cuda.Context, Do) {
	t.Helper()
	drv, ctx, _, err := fake.OpenPrimary(fake.H200())
	if err != nil {
		t.Fatal(err)
	}
	return drv, ctx, func(f func(cuda.Context) error) error { return f(ctx) }
}

// An event lives until its Close or its set's, whichever comes first; the
// set destroys what is left, and both Closes are idempotent.
func TestEventLifecycle(t *testing.T) {
	drv, ctx, do := primary(t)
	var set Set
	a, err := set.New(drv, do, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := set.New(drv, do, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []*Event{a, b} {
		if err := e.Record(0); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Since(a); err != nil || d < 0 {
		t.Fatalf("Since: %v, %v", d, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := a.Record(0); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("Record after Close: %v", err)
	}
	if _, err := b.Since(a); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("Since a closed start: %v", err)
	}
	before := drv.Calls("cuEventDestroy_v2")
	if err := set.Close(drv, ctx); err != nil {
		t.Fatal(err)
	}
	if n := drv.Calls("cuEventDestroy_v2") - before; n != 1 {
		t.Fatalf("the set's Close destroyed %d events; want the 1 left", n)
	}
	if err := b.Close(); err != nil || !b.Closed() {
		t.Fatalf("Close after the set's: %v (closed %v)", err, b.Closed())
	}
	if _, err := set.New(drv, do, nil); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("New on a closed set: %v", err)
	}
}

// An owner that refuses the call (closed, or the device lost) leaves the
// event to the set's Close, and Close says nothing went wrong.
func TestCloseLeavesARefusedEventToTheSet(t *testing.T) {
	drv, ctx, do := primary(t)
	for _, refusal := range []error{errs.ErrClosed, errs.ErrDeviceLost} {
		var set Set
		refuse := false
		e, err := set.New(drv, func(f func(cuda.Context) error) error {
			if refuse {
				return refusal
			}
			return do(f)
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		refuse = true
		if err := e.Close(); err != nil {
			t.Fatalf("%v: Close: %v", refusal, err)
		}
		before := drv.Calls("cuEventDestroy_v2")
		if err := set.Close(drv, ctx); err != nil {
			t.Fatal(err)
		}
		if drv.Calls("cuEventDestroy_v2")-before != 1 {
			t.Fatalf("%v: the set's Close did not destroy the event", refusal)
		}
	}
}

// Counted makes each call inside the owner's life lock: entered before,
// exited after with the slot enter gave, and not made when enter refuses.
func TestCountedCallsInTheLifeLock(t *testing.T) {
	var in, slot uint32 = 0, 41
	var refuse error
	enter := func() (uint32, error) {
		if refuse != nil {
			return 0, refuse
		}
		in++
		slot++
		return slot, nil
	}
	exit := func(s uint32) {
		if s != slot {
			t.Errorf("exit with slot %d, entered %d", s, slot)
		}
		in--
	}
	do := Counted(enter, exit, func(f func(cuda.Context) error) error { return f(0) })
	calls := 0
	if err := do(func(cuda.Context) error {
		if in != 1 {
			t.Errorf("call made with %d entries, want 1", in)
		}
		calls++
		return nil
	}); err != nil || calls != 1 || in != 0 {
		t.Fatalf("err %v, %d calls, %d left in", err, calls, in)
	}
	refuse = errs.ErrClosed
	if err := do(func(cuda.Context) error { calls++; return nil }); !errors.Is(err, errs.ErrClosed) || calls != 1 {
		t.Fatalf("refused enter: err %v, %d calls", err, calls)
	}
}

// The owner's life lock comes before the set's lock (docs/LOCKS.md), as a
// graph's calls take them: a New waiting at a Reshape's gate must not hold
// the set's lock, which a New from inside a Do, which the Reshape waits
// for, then waits for. (Make and Close held the set's lock across do, and
// the three waited for each other.)
func TestLifeLockBeforeTheSetsLock(t *testing.T) {
	drv, ctx, raw := primary(t)
	var l life.Lock
	entering := make(chan struct{})
	enter := func(pass bool) func() (uint32, error) {
		return func() (uint32, error) {
			if !pass {
				close(entering)
			}
			slot, ok := l.Enter(func() bool { return pass })
			if !ok {
				return 0, errs.ErrClosed
			}
			return slot, nil
		}
	}
	inDo, outside := Counted(enter(true), l.Exit, raw), Counted(enter(false), l.Exit, raw)
	var set Set
	doSlot, _ := l.Enter(func() bool { return true }) // a Do in flight
	paused := make(chan error, 1)
	go func() { paused <- l.Pause(context.Background()) }() // a Reshape, waiting for the Do
	for !l.Paused() {
		time.Sleep(time.Millisecond)
	}
	made := make(chan error, 1)
	go func() { _, err := set.New(drv, outside, nil); made <- err }() // held at the gate
	<-entering
	done := make(chan error, 1)
	go func() { // the Do makes an event and closes it
		e, err := set.New(drv, inDo, nil)
		if err == nil {
			err = e.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the Do's New waits for the set's lock, held by a New waiting for the Reshape, which waits for the Do")
	}
	l.Exit(doSlot)
	if err := <-paused; err != nil {
		t.Fatal(err)
	}
	l.Resume()
	if err := <-made; err != nil {
		t.Fatal(err)
	}
	if err := set.Close(drv, ctx); err != nil {
		t.Fatal(err)
	}
}
