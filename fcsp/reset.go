package fcsp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
)

// Reset brings a lost pool back (a healthy one may be reset too): it waits
// for the tenants' calls in flight, destroys the green contexts, resets the
// device's primary context (cuDevicePrimaryCtxReset_v2: every allocation of
// this process on the device dies), and rebuilds every partition over the
// same SMs and every tenant with its name, quota, rate limit and pool.
//
// What the caller holds stays valid: *Tenant handles, their first streams
// and the streams made by NewStream (with new driver handles), modules and
// functions (loaded again from the image LoadModule kept). What died with
// the context answers ErrStale: device pointers taken before (Free says
// ErrStale once; their bytes are no longer counted, so every quota is back
// to zero used) and events. Streams adopted with Adopt are forgotten (their
// owner must make them again); raw handles (Context, Stream.Handle) change.
// A device pointer from before must not be passed to a kernel or a copy:
// the driver may hand the same address out again.
//
// ctx is honoured until the reset begins; from then on it runs to the end,
// since stopping half-way would leave no partition usable. Calls that
// arrive meanwhile fail with ErrDeviceLost. If the reset itself fails the
// pool stays lost and Reset returns a *DeviceLostError wrapping the
// driver's error.
//
// On a real driver a sticky fault cannot be reset in-process: on the H200,
// cuDevicePrimaryCtxReset_v2 runs and the next cuDevicePrimaryCtxRetain
// answers the same sticky code, as the CUDA documentation says (the process
// must be terminated and relaunched to use CUDA again). Reset then returns
// a *DeviceLostError with NeedsRestart set, naming the CUDA result, and the
// pool stays lost for good: every call answers ErrDeviceLost, Health says
// NeedsRestart, later Resets refuse at once, Close works. The way back is a
// new process (a supervisor restarts it; examples/faultdomain). Reset
// brings back a healthy pool, and a faulted one only where the driver
// clears the fault (the simulator with its resettable-faults option).
func (p *Pool) Reset(ctx context.Context) error {
	start := time.Now()
	p.fault.resetMu.Lock() // no tenant Close runs while its tenant is rebuilt
	defer p.fault.resetMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if e := p.fault.lost.Load(); e != nil && e.NeedsRestart {
		return fmt.Errorf("fcsp: Reset: %w", e)
	}
	// A reset of a healthy pool is a loss for its duration.
	p.fault.lost.CompareAndSwap(nil, &DeviceLostError{At: start, reason: "Pool.Reset in progress"})
	cores := make([]*tenantCore, 0, len(p.tenants))
	for _, c := range p.tenants {
		cores = append(cores, c)
	}
	for _, c := range cores {
		c.life.end() // calls in flight finish (they fail fast: the pool is lost)
	}
	defer func() {
		for _, c := range cores {
			c.life.ending.Store(false)
		}
	}()
	raw := p.fault.raw
	orphans := make(map[*tenantCore][]cuda.DevicePtr, len(cores))
	for _, c := range cores {
		orphans[c] = c.drop()
	}
	var parts []*greenctx.Partition
	for _, c := range cores {
		if c.part != nil {
			parts = append(parts, c.part)
		}
	}
	parts = append(parts, p.spare...)
	for _, part := range parts {
		if err := part.Abandon(); err != nil {
			p.log.Debug("fcsp: destroying a poisoned green context", "err", err)
		}
	}
	fail := func(err error) error {
		e := &DeviceLostError{At: time.Now(), reason: fmt.Sprintf("Pool.Reset failed: %v", err)}
		var ce *cuda.Error
		if errors.As(err, &ce) {
			e.Err = ce
			if ce.Code.Sticky() {
				e.NeedsRestart = true
				e.reason = fmt.Sprintf("Pool.Reset failed: %v: the fault outlived the reset of the primary context; "+
					"the CUDA driver requires this process to exit and be restarted to use the device again", err)
			}
		}
		p.fault.lost.Store(e)
		p.log.Error("fcsp: reset failed; the pool stays lost", "err", err, "needs_restart", e.NeedsRestart)
		return fmt.Errorf("fcsp: Reset: %w", e)
	}
	if err := p.dev.ResetPrimary(); err != nil {
		return fail(err)
	}
	// Stream-ordered pools belong to the device, not to a context, so the
	// reset may leave them and their blocks alive (cuCtxDestroy does). Free
	// the blocks and destroy the pools; where the reset took them already,
	// the driver's complaint is expected and only logged.
	var leftovers int
	for c, ptrs := range orphans {
		if c.mpool == nil {
			continue
		}
		for _, ptr := range ptrs {
			if raw.MemFree(p.dev.Primary(), ptr) == nil {
				leftovers++
			}
		}
		if raw.MemPoolDestroy(p.dev.Primary(), c.mpool.h) == nil {
			leftovers++
		}
	}
	for _, part := range parts {
		if err := part.Rebuild(); err != nil {
			return fail(fmt.Errorf("rebuilding a %d-SM partition: %w", part.SMs(), err))
		}
	}
	for _, c := range cores {
		if err := c.rebuild(raw); err != nil {
			return fail(fmt.Errorf("rebuilding tenant %q: %w", c.name, err))
		}
	}
	for _, c := range cores { // events died with the contexts (rel branch)
		c.events.forget()
		c.graphs.forget()
	}
	p.events.forget()
	p.fault.gen.Add(1)
	p.fault.lost.Store(nil)
	took := time.Since(start)
	p.fault.resets.Add(1)
	p.fault.lastReset.Store(int64(took))
	p.log.Info("fcsp: pool reset", "tenants", len(cores), "partitions", len(parts), "pool_objects_freed_after_reset", leftovers, "took", took)
	return nil
}

// drop forgets what died with the context: the accounting of the tenant's
// allocations (their pointers remembered as stale) and its streams' cached
// blocks. It returns them all, for a pool's blocks may outlive the reset.
// The tenant is quiesced.
func (c *tenantCore) drop() (ptrs []cuda.DevicePtr) {
	for _, a := range c.acct.Live() {
		if _, err := c.acct.Release(a.Ptr); err == nil {
			c.pool.fault.stale.Store(staleKey{c, DevicePtr(a.Ptr)}, struct{}{})
			ptrs = append(ptrs, cuda.DevicePtr(a.Ptr))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.streams {
		ptrs = append(ptrs, s.drain()...)
	}
	return ptrs
}

// rebuild gives the quiesced tenant new driver handles after the reset:
// streams, pool, modules and functions. Its partition was rebuilt already.
func (c *tenantCore) rebuild(raw cuda.Driver) error {
	p := c.pool
	ctx := c.ctx()
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.streams[:0]
	for _, s := range c.streams {
		s.forgetEvents() // they died with the context
		switch {
		case !s.owned: // adopted: its owner's handle died; forget it
			s.closed.Store(true)
			continue
		case s == c.first && c.part != nil:
			s.hv.Store(uintptr(c.part.Stream()))
		case c.part != nil:
			h, err := c.part.NewStream(0)
			if err != nil {
				return err
			}
			s.hv.Store(uintptr(h))
		default:
			h, err := raw.StreamCreate(p.dev.Primary(), cuda.StreamNonBlocking)
			if err != nil {
				return err
			}
			s.hv.Store(uintptr(h))
		}
		kept = append(kept, s)
	}
	clear(c.streams[len(kept):])
	c.streams = kept
	if m := c.mpool; m != nil {
		h, err := raw.MemPoolCreate(ctx, p.dev.Ordinal(), m.maxSize)
		if err != nil {
			return err
		}
		threshold := m.keep
		if threshold == 0 {
			threshold = c.acct.Limit() // memtrack owns the quota
		}
		if err := raw.MemPoolSetAttribute(ctx, h, cuda.PoolReleaseThreshold, threshold); err != nil {
			return errors.Join(err, raw.MemPoolDestroy(ctx, h))
		}
		m.h = h
	}
	for _, m := range c.modules {
		if m.hs != nil { // a reshapable tenant's: in every layout (reshape.go)
			if err := m.reload(raw); err != nil {
				return err
			}
			continue
		}
		h, err := raw.ModuleLoadData(ctx, m.image)
		if err != nil {
			return fmt.Errorf("loading a module again: %w", err)
		}
		m.h = h
		for _, f := range m.funcs {
			if f.h, err = raw.ModuleGetFunction(ctx, h, f.name); err != nil {
				return fmt.Errorf("finding kernel %q again: %w", f.name, err)
			}
		}
	}
	return nil
}

// fresh wraps an event's call path so that an event made before a reset
// answers ErrStale instead of reaching the driver with a dead handle.
func (p *Pool) fresh(do func(func(cuda.Context) error) error) func(func(cuda.Context) error) error {
	gen := p.fault.gen.Load()
	return func(f func(cuda.Context) error) error {
		if p.fault.gen.Load() != gen {
			return fmt.Errorf("%w: the event was made before Pool.Reset", ErrStale)
		}
		return do(f)
	}
}
