package fcsp

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/hostwait"
	"github.com/fcsp-go/fcsp-go/internal/teardown"
)

// Shutdown is Close with a deadline, as net/http's Server.Shutdown: it
// closes the tenant (waiting for calls in flight and synchronising its
// streams) and returns Close's error, or ctx.Err() if ctx ends first. The
// close then carries on in the background and the tenant still ends
// closed. The waiting is Close's own, so Shutdown waits for what Close
// waits for. A ctx that has already ended still starts the close (the usual
// defer t.Shutdown(r.Context()) of a handler whose client left must not
// leak the tenant) and returns ctx's error.
func (c *tenantCore) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	return hostwait.Within(ctx, func() error {
		c.cleanup.Stop()
		return c.close(teardown.Closed)
	})
}

// Shutdown is Close with a deadline, as net/http's Server.Shutdown: it
// returns Close's error, or ctx.Err() if ctx ends first (or had ended),
// while the close carries on in the background; a later Close waits for it.
func (p *Pool) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	if err := p.checkNotInsideDo("Pool.Shutdown"); err != nil {
		return err
	}
	err := hostwait.Within(ctx, p.Close)
	if ctx.Err() != nil && err == ctx.Err() {
		for _, r := range p.stalled() { // what the close, left running, may never end
			err = fmt.Errorf("%w; %s stalled (its work left as it is): %w", err, tenantName(r.Tenant), ErrStalled)
		}
	}
	return err
}

// SynchronizeContext is Synchronize bounded by ctx: it returns ctx.Err()
// if ctx ends before the stream's work does (the work is not cancelled;
// a GPU cannot take a kernel back).
func (h *Stream) SynchronizeContext(ctx context.Context) error {
	s, err := h.acquire()
	if err != nil {
		return err
	}
	c := s.t
	inDriver := c.pool.cfg.HostWaitSet && c.pool.cfg.HostWait == SpinInDriver // a wait nothing ends
	s.release()
	if ctx == nil {
		return c.fail("Stream.SynchronizeContext", errNilContext)
	}
	// The wait acquires the stream itself: one left to run aside when ctx
	// ends keeps it from reuse until it is over.
	return c.fail("Stream.SynchronizeContext", hostwait.Bounded(ctx, inDriver, func(done <-chan struct{}) error {
		s, err := h.acquire()
		if err != nil {
			return err
		}
		defer s.release()
		return s.wait(done)
	}))
}

// FreeContext is Free bounded by ctx. Without WithMemoryPool, cuMemFree
// waits for the device's work in flight; FreeContext returns ctx.Err() if
// ctx ends first, and the memory is freed all the same once that work is
// done (do not use p after the call). An ended ctx frees nothing and
// returns ctx.Err(), as Alloc allocates nothing.
func (c *tenantCore) FreeContext(ctx context.Context, p DevicePtr) error {
	if ctx == nil {
		return errNilContext
	}
	return hostwait.Bounded(ctx, true, func(<-chan struct{}) error { return c.Free(p) })
}
