// Package event is the engine behind fcsp's Events: CUDA events made,
// recorded, waited for, timed and destroyed through a driver, each in a Set
// whose owner (a tenant or a pool) destroys what is left when it closes, so
// that an event made while (or forgotten when) its owner closes never
// outlives it in the driver.
package event

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Do runs f with a context of the event's owner, or fails: closed
// (errs.ErrClosed), or the device lost (errs.ErrDeviceLost). A tenant's
// counts f in its life lock, so the tenant's Close destroys its events
// only after the calls on them have finished.
type Do func(f func(cuda.Context) error) error

// Counted is do with each call counted in its owner's life lock (enter,
// then exit with enter's slot; enter's error refuses the call), so that
// the owner's Close destroys its events only after the calls on them have
// finished.
func Counted(enter func() (uint32, error), exit func(uint32), do Do) Do {
	return func(f func(cuda.Context) error) error {
		slot, err := enter()
		if err != nil {
			return err
		}
		defer exit(slot)
		return do(f)
	}
}

// Event is one CUDA event of a Set.
type Event struct {
	do     Do
	wait   Do // for Synchronize: where the owner waits without a lock
	drv    cuda.Driver
	h      cuda.Event
	set    *Set
	closed atomic.Bool
}

// Set is the live events of one owner. Its zero value is empty and open.
type Set struct {
	mu     sync.Mutex
	live   map[*Event]struct{}
	closed bool
}

// Make makes e, a new Event's storage (the caller's, so that a wrapper
// and its event are one allocation), an event of the set through do, which
// also serves its later calls; Synchronize waits through wait (do where
// nil). A closed set refuses with errs.ErrClosed. The set's lock is taken
// inside do's call, after the owner's life lock (docs/LOCKS.md): a Make
// held at a Reshape's gate holds nothing a call in flight may wait for.
func (set *Set) Make(e *Event, drv cuda.Driver, do, wait Do) error {
	if wait == nil {
		wait = do
	}
	e.do, e.wait, e.drv, e.set = do, wait, drv, set
	return do(func(ctx cuda.Context) (err error) {
		set.mu.Lock()
		defer set.mu.Unlock()
		if set.closed {
			return errs.ErrClosed
		}
		if e.h, err = drv.EventCreate(ctx, cuda.EventDefault); err != nil {
			return err
		}
		if set.live == nil {
			set.live = map[*Event]struct{}{}
		}
		set.live[e] = struct{}{}
		return nil
	})
}

// New is Make of a new Event.
func (set *Set) New(drv cuda.Driver, do, wait Do) (*Event, error) {
	e := new(Event)
	if err := set.Make(e, drv, do, wait); err != nil {
		return nil, err
	}
	return e, nil
}

// Close destroys the events left, in ctx; later News fail with
// errs.ErrClosed. The owner's calls are over (a tenant's life lock has
// ended).
func (set *Set) Close(drv cuda.Driver, ctx cuda.Context) error {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.closed = true
	var l []error
	for e := range set.live {
		e.closed.Store(true)
		l = append(l, drv.EventDestroy(ctx, e.h))
	}
	set.live = nil
	return errors.Join(l...)
}

// Closed says the event was destroyed (or its set closed).
func (e *Event) Closed() bool { return e.closed.Load() }

// Record marks the event on s (0: the NULL stream of the event's context).
func (e *Event) Record(s cuda.Stream) error {
	if e.closed.Load() {
		return errs.ErrClosed
	}
	return e.do(func(ctx cuda.Context) error { return e.drv.EventRecord(ctx, e.h, s) })
}

// Synchronize waits until the GPU has reached the event.
func (e *Event) Synchronize() error {
	if e.closed.Load() {
		return errs.ErrClosed
	}
	return e.wait(func(ctx cuda.Context) error { return e.drv.EventSynchronize(ctx, e.h) })
}

// Since is the GPU time from start to e (both recorded and reached).
func (e *Event) Since(start *Event) (time.Duration, error) {
	if e.closed.Load() || start.closed.Load() {
		return 0, errs.ErrClosed
	}
	var ms float32
	err := e.do(func(ctx cuda.Context) (err error) {
		ms, err = e.drv.EventElapsedMs(ctx, start.h, e.h)
		return err
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// Close destroys the event. It is idempotent, and an event whose set closed
// first was destroyed by the set's Close: Close then returns nil. As Make,
// it takes the set's lock inside do's call.
func (e *Event) Close() error {
	if e.closed.Load() {
		return nil
	}
	err := e.do(func(ctx cuda.Context) error {
		e.set.mu.Lock()
		defer e.set.mu.Unlock()
		if e.set.closed || e.closed.Load() {
			return nil
		}
		err := e.drv.EventDestroy(ctx, e.h)
		e.closed.Store(true)
		if !errors.Is(err, errs.ErrDeviceLost) {
			delete(e.set.live, e)
		}
		return err
	})
	switch {
	case errors.Is(err, errs.ErrClosed):
		return nil // the owner is closing: its Set.Close destroys it
	case errors.Is(err, errs.ErrDeviceLost):
		e.closed.Store(true)
		return nil // kept in the set: the owner's Close destroys it (the guard lets that through)
	}
	return err
}
