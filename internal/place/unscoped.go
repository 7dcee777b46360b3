package place

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Unscoped runs f, a launch or a synchronisation on one of pl's streams,
// with a zero context where the driver allows it, else with dev's primary
// context. Whether the driver accepts launches and synchronisations with no
// context current (the stream naming it) is learned on first use and
// remembered in state (devmem's encoding: ProbeUnknown, ProbeYes, ProbeNo):
// if it does, a tenant's launches and waits need not take its green
// context's lock, so one request's Synchronize no longer holds up another's
// launch. log hears when the driver refuses. The caller is counted in the
// tenant's life lock.
func Unscoped(state *atomic.Int32, pl Placement, dev *smpart.Device, log *slog.Logger, f func(ctx cuda.Context) error) error {
	// The primary context may be current anywhere; a green context takes
	// no context current where the driver accepts that (probed once).
	if ctx := pl.AnyThread(); ctx != 0 || state.Load() == devmem.ProbeYes {
		return f(ctx)
	}
	// Where the driver wants a context, the primary one serves a green
	// stream's launches and waits too (docs/CONTEXTS.md). The caller is in
	// the life lock already: entering it again could wait at a Reshape's
	// gate while the Reshape waited for this call.
	if state.Load() == devmem.ProbeNo {
		return f(dev.Primary())
	}
	err := f(0)
	switch {
	case err == nil:
		state.Store(devmem.ProbeYes)
	case errors.Is(err, cuda.ErrorInvalidContext), errors.Is(err, cuda.ErrorInvalidHandle):
		state.Store(devmem.ProbeNo)
		log.Info("driver needs a current context for launches and waits; using the primary context")
		return f(dev.Primary())
	}
	return err
}

// Launcher queues a pool's kernel launches, choosing the context as
// Unscoped does: made once, at Open.
type Launcher struct {
	Drv   cuda.Driver
	State *atomic.Int32 // the launch probe (Unscoped)
	Dev   *smpart.Device
	Log   *slog.Logger
}

// Launch queues kernel f on s, a stream of pl's, as grid x block. The usual
// paths (the primary context; none, where the driver takes a launch with
// no context current) make no closure; the probe and the fallback go
// through Unscoped. The caller is counted in the tenant's life lock.
func (l *Launcher) Launch(pl Placement, f cuda.Function, grid, block cuda.Dim3, shmem uint32, s cuda.Stream, args *cuda.Args) error {
	if ctx := pl.AnyThread(); ctx != 0 || l.State.Load() == devmem.ProbeYes {
		return l.Drv.LaunchKernel(ctx, f, grid, block, shmem, s, args)
	}
	return Unscoped(l.State, pl, l.Dev, l.Log, func(ctx cuda.Context) error {
		return l.Drv.LaunchKernel(ctx, f, grid, block, shmem, s, args)
	})
}

// LaunchIn queues kernel f on s with ctx current: a timed launch, between
// its events, with the primary context.
func (l *Launcher) LaunchIn(ctx cuda.Context, f cuda.Function, grid, block cuda.Dim3, shmem uint32, s cuda.Stream, args *cuda.Args) error {
	return l.Drv.LaunchKernel(ctx, f, grid, block, shmem, s, args)
}
