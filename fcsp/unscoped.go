package fcsp

import (
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// unscopedProbe is whether the driver accepts launches, synchronisations
// and pool calls with no context current (the stream naming it): learned
// on first use and remembered per pool (place.Unscoped), in devmem's
// encoding (devmem.ProbeUnknown, ProbeYes, ProbeNo).
type unscopedProbe struct{ launch, sync, pool atomic.Int32 }

// doUnscoped runs f with a zero context where the driver allows it, else
// with the tenant's context under its lock. The call is counted in the
// tenant's life lock so Close cannot destroy the stream underneath f.
func (c *tenantCore) doUnscoped(state *atomic.Int32, f func(ctx cuda.Context) error) error {
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.Exit(slot)
	return c.doUnscopedLocked(state, f)
}

// doUnscopedLocked is doUnscoped for a caller already counted in the life
// lock (place.Unscoped says how the context is chosen).
func (c *tenantCore) doUnscopedLocked(state *atomic.Int32, f func(ctx cuda.Context) error) error {
	return place.Unscoped(state, c.place.Placement, c.pool.dev, c.pool.log, f)
}
