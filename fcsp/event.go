package fcsp

import (
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Event marks a point in a stream, for timing on the GPU's clock.
type Event struct {
	do   func(func(cuda.Context) error) error
	wait func(func(cuda.Context) error) error // for Synchronize: unscoped where possible
	drv  cuda.Driver
	h    cuda.Event
}

// NewEvent makes an event in the tenant's context.
func (c *tenantCore) NewEvent() (*Event, error) {
	do := c.pool.fresh(c.do)
	e, err := newEvent(c.pool.drv, do)
	if err == nil {
		e.wait = c.pool.fresh(func(f func(cuda.Context) error) error { return c.doUnscoped(&c.pool.unscoped.sync, f) })
	}
	return e, err
}

// NewEvent makes an event in the device's primary context; Record(nil)
// marks that context's NULL stream, which (since tenant streams are
// non-blocking) records the moment the GPU reaches it.
func (p *Pool) NewEvent() (*Event, error) {
	return newEvent(p.drv, p.fresh(func(f func(cuda.Context) error) error { return f(p.dev.Primary()) }))
}

func newEvent(drv cuda.Driver, do func(func(cuda.Context) error) error) (*Event, error) {
	e := &Event{do: do, wait: do, drv: drv}
	err := do(func(ctx cuda.Context) (err error) {
		e.h, err = drv.EventCreate(ctx, cuda.EventDefault)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Record marks the event on s, or on the NULL stream if s is nil. The
// stream must belong to the event's context.
func (e *Event) Record(s *Stream) error {
	var h cuda.Stream
	if s != nil {
		if s.closed.Load() {
			return ErrClosed
		}
		h = s.h
	}
	return e.do(func(ctx cuda.Context) error { return e.drv.EventRecord(ctx, e.h, h) })
}

// Synchronize waits until the GPU has reached the event.
func (e *Event) Synchronize() error {
	return e.wait(func(ctx cuda.Context) error { return e.drv.EventSynchronize(ctx, e.h) })
}

// Since is the GPU time from start to e (both recorded and reached).
func (e *Event) Since(start *Event) (time.Duration, error) {
	var ms float32
	err := e.do(func(ctx cuda.Context) (err error) {
		ms, err = e.drv.EventElapsedMs(ctx, start.h, e.h)
		return err
	})
	return time.Duration(float64(ms) * float64(time.Millisecond)), err
}

// Close destroys the event.
func (e *Event) Close() error {
	return e.do(func(ctx cuda.Context) error { return e.drv.EventDestroy(ctx, e.h) })
}
