package fcsp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Reshape is Tenant.Reshape (its doc says what it keeps, waits for and
// refuses): a growth's claim, the commons' move off it and the wait for
// the givers' work (handoff.go), the pause of the tenant's calls, the
// switch of layout and streams, a shrink's commons' move onto what it
// gave, the launch-rate limit resized.
func (c *tenantCore) Reshape(ctx context.Context, sms int) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.checkNotInsideDo(); err != nil {
		return err // it would wait for the Do it is called from
	}
	if c.closed.Load() {
		return ErrClosed
	}
	if !c.place.Reshapable() {
		return errNotReshapable
	}
	c.reshape.Lock()
	defer c.reshape.Unlock()
	start := time.Now()
	// Growing: onto SMs whose givers' queued work has run (handoff.go).
	// The layout changes only under c.reshape, so SMs() is stable here.
	if sms > c.place.SMs() {
		if err := c.prepareGrowth(ctx, sms); err != nil {
			return err
		}
		// Until the switch uses the claim, an error gives it back; after
		// c's calls resume (deferred below, so run first).
		defer func() {
			if c.place.SMs() != sms {
				c.unclaim()
			}
		}()
	}
	handed := time.Now()
	// Calls only: a Synchronize in flight goes on, on the old layout's
	// stream (valid until the tenant closes), where the work queued before
	// it runs. Measured on an H100 (run A2): waiting for the batch class's
	// Synchronize of a GEMM pair made each move of a latency class 2-7 ms.
	if err := c.life.PauseCalls(ctx); err != nil {
		return err
	}
	defer c.life.Resume()
	if c.closed.Load() {
		return ErrClosed
	}
	paused := time.Now() // the log line tells the wait for calls from the switch
	from := c.place.SMs()
	if err := c.place.Reshape(sms, c.swapStreams()); err != nil {
		return err // smpart.ErrClosed is ErrClosed: one identity
	}
	if err := c.moveCommons(from); err != nil {
		return err
	}
	// A launch-rate limit is threads per refill period of the tenant's
	// SMs: it follows them (a GPU share is of the device's time, whatever
	// the SMs). sms was checked against the layouts, so this cannot fail.
	if err := c.adm.SetSMs(sms); err != nil {
		return fmt.Errorf("resizing its launch-rate limit: %w", err)
	}
	if from != sms {
		c.pool.log.Debug("tenant reshaped", "tenant", c.name, "from_sms", from, "sms", sms, "took", time.Since(start),
			"handoff_wait", handed.Sub(start), "calls_wait", paused.Sub(handed))
	}
	return nil
}

// loadModule loads image once, with the primary context: a module loaded
// there serves every green stream of the device, on that stream's SMs
// (docs/CONTEXTS.md), so a reshapable tenant's layouts share it.
func (c *tenantCore) loadModule(m *Module, image []byte) error {
	return c.do(func(ctx cuda.Context) (err error) {
		if m.h, err = c.pool.dev.LoadModule(ctx, image); err != nil {
			return err
		}
		// Listed in the life lock: a Close racing the load waits for it,
		// then unloads the module with the others.
		c.mu.Lock()
		c.modules = append(c.modules, m)
		c.mu.Unlock()
		return nil
	})
}

// function looks f up in m.
func (m *Module) function(f *Function) error {
	return m.t.do(func(ctx cuda.Context) (err error) {
		f.h, err = m.t.pool.dev.Function(ctx, m.h, f.name)
		return err
	})
}

// handle is the function's driver handle.
func (f *Function) handle() cuda.Function { return f.h }

// unload unloads the module.
func (m *Module) unload(ctx cuda.Context) error { return m.t.pool.dev.UnloadModule(ctx, m.h) }

// moveCommons moves the unpartitioned tenants onto the SMs the tenant gave
// back (a growth moved them off its new SMs before, prepareGrowth). A move
// that fails is undone (back to from SMs).
func (c *tenantCore) moveCommons(from int) error {
	if err := c.pool.followSplit(); err != nil {
		return errors.Join(err, c.place.Reshape(from, c.swapStreams()))
	}
	return nil
}

// swapStreams is Reshape's swap: each of the tenant's own streams on old
// moves to new.
func (c *tenantCore) swapStreams() func(old, new cuda.Stream) {
	c.mu.Lock()
	streams := append([]*streamCore(nil), c.streams...)
	c.mu.Unlock()
	return func(old, new cuda.Stream) {
		for _, s := range streams {
			if s.fromPart && s.h() == old {
				s.hv.Store(uintptr(new))
			}
		}
	}
}
