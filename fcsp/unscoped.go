package fcsp

import (
	"errors"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
)

// Whether the driver accepts launches and synchronisations with no context
// current (the stream naming it) is learned on first use and remembered per
// pool: if it does, a tenant's launches and waits need not take its green
// context's lock, so one request's Synchronize no longer holds up another's
// launch. The memory engine keeps the pool calls' probe, in the same
// encoding (internal/devmem).
const (
	probeUnknown = devmem.ProbeUnknown
	probeYes     = devmem.ProbeYes
	probeNo      = devmem.ProbeNo
)

type unscopedProbe struct{ launch, sync, pool atomic.Int32 }

// doUnscoped runs f with a zero context where the driver allows it, else
// with the tenant's context under its lock. The call is counted in the
// tenant's life lock so Close cannot destroy the stream underneath f.
func (c *tenantCore) doUnscoped(state *atomic.Int32, f func(ctx cuda.Context) error) error {
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.exit(slot)
	return c.doUnscopedLocked(state, f)
}

// doUnscopedLocked is doUnscoped for a caller already counted in the life
// lock.
func (c *tenantCore) doUnscopedLocked(state *atomic.Int32, f func(ctx cuda.Context) error) error {
	// The primary context may be current anywhere; a green context takes
	// no context current where the driver accepts that (probed once).
	if ctx := c.place.anyThread(); ctx != 0 || state.Load() == probeYes {
		return f(ctx)
	}
	// Where the driver wants a context, the primary one serves a green
	// stream's launches and waits too (docs/CONTEXTS.md). The caller is in
	// the life lock already: entering it again (c.do) could wait at a
	// Reshape's gate while the Reshape waited for this call.
	if state.Load() == probeNo {
		return f(c.pool.dev.Primary())
	}
	err := f(0)
	switch {
	case err == nil:
		state.Store(probeYes)
	case errors.Is(err, cuda.ErrorInvalidContext), errors.Is(err, cuda.ErrorInvalidHandle):
		state.Store(probeNo)
		c.pool.log.Info("driver needs a current context for launches and waits; using the primary context")
		return f(c.pool.dev.Primary())
	}
	return err
}
