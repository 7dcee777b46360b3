package fcsp

import (
	"fmt"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/event"
)

// Event marks a point in a stream, for timing on the GPU's clock.
type Event struct {
	e event.Event
	t *tenantCore // its tenant, which its errors name; nil: the pool's
}

// fail names e's tenant in err (TenantError); a pool event's errors are
// bare.
func (e *Event) fail(op string, err error) error {
	if e.t == nil {
		return err
	}
	return e.t.fail(op, err)
}

// NewEvent makes an event in the tenant's context.
func (c *tenantCore) NewEvent() (*Event, error) {
	// Every call on a tenant's event is counted in the tenant's life lock,
	// once (Counted; a second entry could wait at a Reshape's gate while
	// the Reshape waited for the first), so the tenant's Close destroys its
	// events only after the calls on them have finished.
	wait := func(f func(cuda.Context) error) error { return c.unscoped(&c.pool.unscoped.sync, f) }
	e := &Event{t: c}
	if err := c.events.Make(&e.e, c.pool.drv, event.Counted(c.enter, c.life.Exit, c.primary), event.Counted(c.enter, c.life.Exit, wait)); err != nil {
		return nil, err
	}
	return e, nil
}

// NewEvent makes an event in the device's primary context; Record(nil)
// marks that context's NULL stream, which (since tenant streams are
// non-blocking) records the moment the GPU reaches it.
func (p *Pool) NewEvent() (*Event, error) {
	e := new(Event)
	if err := p.events.Make(&e.e, p.drv, func(f func(cuda.Context) error) error { return f(p.dev.Primary()) }, nil); err != nil {
		return nil, err
	}
	return e, nil
}

// Record marks the event on s, which must belong to the event's context.
// A nil s is not an error (unlike the SDK's other nil arguments): the event
// is recorded on the NULL stream of the event's context (the tenant's, or
// the primary context's for Pool.NewEvent), not on a tenant's first
// stream; to mark the work queued on the first stream, pass
// Tenant.Stream().
func (e *Event) Record(s *Stream) error {
	var h cuda.Stream
	if s != nil {
		c, err := s.acquire()
		if err != nil {
			return e.fail("Event.Record", err)
		}
		defer c.release()
		if c.Closed() || c.t.closed.Load() {
			return e.fail("Event.Record", ErrClosed) // a pool event's record is in no tenant's life lock: the tenant's Close may be under way
		}
		h = c.h()
	}
	return e.fail("Event.Record", e.e.Record(h))
}

// Synchronize waits until the GPU has reached the event.
func (e *Event) Synchronize() error { return e.fail("Event.Synchronize", e.e.Synchronize()) }

// Since is the GPU time from start to e (both recorded and reached).
func (e *Event) Since(start *Event) (time.Duration, error) {
	if start == nil {
		return 0, e.fail("Event.Since", fmt.Errorf("%w: a nil start event", ErrInvalidArgument))
	}
	d, err := e.e.Since(&start.e)
	if err != nil {
		return 0, e.fail("Event.Since", err)
	}
	return d, nil
}

// Close destroys the event. It is idempotent, and an event whose tenant or
// pool closed first was destroyed by that Close: Close then returns nil.
func (e *Event) Close() error { return e.fail("Event.Close", e.e.Close()) }
