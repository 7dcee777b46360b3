package fcsp

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Event marks a point in a stream, for timing on the GPU's clock.
type Event struct {
	do     func(func(cuda.Context) error) error
	wait   func(func(cuda.Context) error) error // for Synchronize: unscoped where possible
	drv    cuda.Driver
	h      cuda.Event
	set    *eventSet
	closed atomic.Bool
}

// eventSet is the live events of a tenant or of the pool: their owner's
// Close destroys what is left, so an event made while (or forgotten when)
// its owner closes never outlives it in the driver.
type eventSet struct {
	mu     sync.Mutex
	live   map[*Event]struct{}
	closed bool
}

// NewEvent makes an event in the tenant's context.
func (c *tenantCore) NewEvent() (*Event, error) {
	// Every call on a tenant's event is counted in the tenant's life lock,
	// so the tenant's Close destroys its events only after the calls on
	// them have finished.
	lived := func(do func(func(cuda.Context) error) error) func(func(cuda.Context) error) error {
		return func(f func(cuda.Context) error) error {
			slot, err := c.enter()
			if err != nil {
				return err
			}
			defer c.life.exit(slot)
			return do(f)
		}
	}
	e, err := newEvent(c.pool.drv, lived(c.do), &c.events)
	if err == nil {
		e.wait = lived(func(f func(cuda.Context) error) error { return c.doUnscoped(&c.pool.unscoped.sync, f) })
	}
	return e, err
}

// NewEvent makes an event in the device's primary context; Record(nil)
// marks that context's NULL stream, which (since tenant streams are
// non-blocking) records the moment the GPU reaches it.
func (p *Pool) NewEvent() (*Event, error) {
	return newEvent(p.drv, func(f func(cuda.Context) error) error { return f(p.dev.Primary()) }, &p.events)
}

func newEvent(drv cuda.Driver, do func(func(cuda.Context) error) error, set *eventSet) (*Event, error) {
	e := &Event{do: do, wait: do, drv: drv, set: set}
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.closed {
		return nil, ErrClosed
	}
	err := do(func(ctx cuda.Context) (err error) {
		e.h, err = drv.EventCreate(ctx, cuda.EventDefault)
		return err
	})
	if err != nil {
		return nil, err
	}
	if set.live == nil {
		set.live = map[*Event]struct{}{}
	}
	set.live[e] = struct{}{}
	return e, nil
}

// close destroys the events left, in ctx; later NewEvents return ErrClosed.
// The owner's calls are over (a tenant's life lock has ended).
func (set *eventSet) close(drv cuda.Driver, ctx cuda.Context) error {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.closed = true
	var errs []error
	for e := range set.live {
		e.closed.Store(true)
		errs = append(errs, drv.EventDestroy(ctx, e.h))
	}
	set.live = nil
	return errors.Join(errs...)
}

// Record marks the event on s, or on the NULL stream if s is nil. The
// stream must belong to the event's context.
func (e *Event) Record(s *Stream) error {
	if e.closed.Load() {
		return ErrClosed
	}
	var h cuda.Stream
	if s != nil {
		if s.closed.Load() {
			return ErrClosed
		}
		h = s.h()
	}
	return e.do(func(ctx cuda.Context) error { return e.drv.EventRecord(ctx, e.h, h) })
}

// Synchronize waits until the GPU has reached the event.
func (e *Event) Synchronize() error {
	if e.closed.Load() {
		return ErrClosed
	}
	return e.wait(func(ctx cuda.Context) error { return e.drv.EventSynchronize(ctx, e.h) })
}

// Since is the GPU time from start to e (both recorded and reached).
func (e *Event) Since(start *Event) (time.Duration, error) {
	if e.closed.Load() || start.closed.Load() {
		return 0, ErrClosed
	}
	var ms float32
	err := e.do(func(ctx cuda.Context) (err error) {
		ms, err = e.drv.EventElapsedMs(ctx, start.h, e.h)
		return err
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// Close destroys the event. It is idempotent, and an event whose tenant or
// pool closed first was destroyed by that Close: Close then returns nil.
func (e *Event) Close() error {
	e.set.mu.Lock()
	defer e.set.mu.Unlock()
	if e.set.closed || e.closed.Load() {
		return nil
	}
	err := e.do(func(ctx cuda.Context) error { return e.drv.EventDestroy(ctx, e.h) })
	if errors.Is(err, ErrClosed) {
		return nil // the owner is closing: its eventSet.close destroys it
	}
	e.closed.Store(true)
	if errors.Is(err, ErrDeviceLost) {
		return nil // kept in the set: the owner's Close destroys it (the guard lets that through)
	}
	delete(e.set.live, e)
	return err
}
