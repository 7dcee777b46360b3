package place

import (
	"log/slog"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/internal/unscoped"
)

// Unscoped runs f, a launch or a synchronisation on one of pl's streams,
// with the context pl lets any thread have current where it has one (the
// primary context), else as probe has learned the driver wants
// (internal/unscoped): with no context current where the driver takes
// that, so that a tenant's launches and waits need not take its green
// context's lock, else with dev's primary context. log hears when the
// driver refuses. The caller is counted in the tenant's life lock:
// entering it again could wait at a Reshape's gate while the Reshape
// waited for this call.
func Unscoped(probe *unscoped.Probe, pl Placement, dev *smpart.Device, log *slog.Logger, f func(ctx cuda.Context) error) error {
	if ctx := pl.AnyThread(); ctx != 0 {
		return f(ctx)
	}
	return probe.Do(dev.Primary(), func(msg string) { log.Info(msg) }, f)
}

// Launcher queues a pool's kernel launches, choosing the context as
// Unscoped does: made once, at Open.
type Launcher struct {
	Drv   cuda.Driver
	Probe *unscoped.Probe // the launches' (Unscoped)
	Dev   *smpart.Device
	Log   *slog.Logger
}

// Launch queues kernel f on s, a stream of pl's, as grid x block. The usual
// paths (the primary context; none, where the driver takes a launch with
// no context current) make no closure; the probe and the fallback go
// through Unscoped. The caller is counted in the tenant's life lock.
func (l *Launcher) Launch(pl Placement, f cuda.Function, grid, block cuda.Dim3, shmem uint32, s cuda.Stream, args *cuda.Args) error {
	if ctx := pl.AnyThread(); ctx != 0 || l.Probe.Yes() {
		return l.Drv.LaunchKernel(ctx, f, grid, block, shmem, s, args)
	}
	return Unscoped(l.Probe, pl, l.Dev, l.Log, func(ctx cuda.Context) error {
		return l.Drv.LaunchKernel(ctx, f, grid, block, shmem, s, args)
	})
}

// LaunchIn queues kernel f on s with ctx current: a timed launch, between
// its events, with the primary context.
func (l *Launcher) LaunchIn(ctx cuda.Context, f cuda.Function, grid, block cuda.Dim3, shmem uint32, s cuda.Stream, args *cuda.Args) error {
	return l.Drv.LaunchKernel(ctx, f, grid, block, shmem, s, args)
}
