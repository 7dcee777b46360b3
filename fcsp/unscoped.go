package fcsp

import (
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/unscoped"
)

// unscopedProbe is whether the driver accepts launches, synchronisations
// and pool calls with no context current (the stream naming it): learned
// on first use and remembered per pool (internal/unscoped).
type unscopedProbe struct{ launch, sync, pool unscoped.Probe }

// unscoped runs f with a zero context where the driver allows it, else
// with the device's primary context (place.Unscoped says how it is
// chosen); the caller is counted in the life lock, so Close cannot
// destroy the stream underneath f.
func (c *tenantCore) unscoped(probe *unscoped.Probe, f func(cc cuda.Context) error) error {
	return place.Unscoped(probe, c.place.Placement, c.pool.dev, c.pool.log, f)
}
