package fcsp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// TestGPUObjectCosts measures what each object the SDK makes holds of the
// device (issue 54), with bare driver calls beneath the pool's guard (the
// pool's meter does not see them): n of a kind made, the driver's used
// memory (cuMemGetInfo; the machine is the process's) before and after,
// per object, beside the figure the SDK charges (internal/cuda's table,
// green contexts measured, the others models), and again after they are
// destroyed. Then the pool's own accounting: a partition warmed at
// NewTenant, whose Overhead is set against what the driver grew by. It
// logs a table to copy into docs/BENCHMARKS.md; it fails only where the
// driver grew by more than the pool counted by a margin (the models too
// low), or a call failed.
func TestGPUObjectCosts(t *testing.T) {
	p := openGPU(t, WithMemorySampling(0))
	drv, ctx, dev := p.drv.(*cuda.Guard).Unwrap(), p.dev.Primary(), p.dev.Ordinal()
	used := func() uint64 {
		t.Helper()
		free, total, err := drv.MemGetInfo(ctx)
		require.NoError(t, err)
		return total - free
	}
	res, err := drv.DeviceGetDevResource(dev, cuda.ResourceSM)
	require.NoError(t, err)
	groups, _, _, err := drv.DevSmResourceSplitByCount(res, 0, 16, 1)
	require.NoError(t, err)
	desc, err := drv.DevResourceGenerateDesc(groups[:1])
	require.NoError(t, err)
	g0, err := drv.GreenCtxCreate(desc, dev, cuda.GreenCtxDefaultStream)
	require.NoError(t, err)
	defer drv.GreenCtxDestroy(g0)
	g0ctx, err := drv.CtxFromGreenCtx(g0)
	require.NoError(t, err)

	type kind struct {
		name  string
		n     int
		model uint64
		make  func() (destroy func() error, err error)
	}
	kinds := []kind{
		{"stream (primary context)", 256, cuda.StreamCost, func() (func() error, error) {
			s, err := drv.StreamCreate(ctx, cuda.StreamNonBlocking)
			return func() error { return drv.StreamDestroy(ctx, s) }, err
		}},
		{"stream (green context)", 256, cuda.StreamCost, func() (func() error, error) {
			s, err := drv.GreenCtxStreamCreate(g0, cuda.StreamNonBlocking, 0)
			return func() error { return drv.StreamDestroy(g0ctx, s) }, err
		}},
		{"event", 1024, cuda.EventCost, func() (func() error, error) {
			e, err := drv.EventCreate(ctx, cuda.EventDisableTiming)
			return func() error { return drv.EventDestroy(ctx, e) }, err
		}},
		{"module (chain PTX)", 16, cuda.ModuleCost(len(kernels.ChainPTX)), func() (func() error, error) {
			m, err := drv.ModuleLoadData(ctx, kernels.ChainPTX)
			return func() error { return drv.ModuleUnload(ctx, m) }, err
		}},
		{"green context", 16, cuda.GreenCtxCost, func() (func() error, error) {
			g, err := drv.GreenCtxCreate(desc, dev, cuda.GreenCtxDefaultStream)
			return func() error { return drv.GreenCtxDestroy(g) }, err
		}},
	}
	t.Logf("%-26s %6s %14s %14s %18s", "object", "made", "per object", "model", "left after destroy")
	for _, k := range kinds {
		before := used()
		var destroys []func() error
		for range k.n {
			d, err := k.make()
			require.NoError(t, err, k.name)
			destroys = append(destroys, d)
		}
		grew := used() - min(before, used())
		for _, d := range destroys {
			require.NoError(t, d(), k.name)
		}
		left := used() - min(before, used())
		t.Logf("%-26s %6d %10.1f KiB %10.1f KiB %14.1f KiB", k.name, k.n, float64(grew)/float64(k.n)/1024, float64(k.model)/1024, float64(left)/float64(k.n)/1024)
	}

	// The pool's count against the driver's: a partition of 16 SMs with 16
	// concurrent Dos, warmed at NewTenant (its streams, its 16 green
	// contexts, the commons' move off its SMs), and a latency class beside.
	before, ov0 := used(), p.Stats().Overhead
	part, err := p.NewTenant("part", WithSMs(16), WithWarmup(func(Current) error { return nil }))
	require.NoError(t, err)
	lat, err := p.NewTenant("latency", WithLatencyTarget(300*time.Microsecond, 24, 40), WithWarmup(func(Current) error { return nil }))
	require.NoError(t, err)
	grew, ov := used()-min(before, used()), p.Stats().Overhead
	counted := ov.Bytes - ov0.Bytes
	t.Logf("a 16-SM partition and a 24-40 SM latency class, warmed: %d green contexts made, %d streams; the driver grew %.1f MiB, the pool counted %.1f MiB (ratio %.2f)",
		ov.GreenMade-ov0.GreenMade, ov.StreamsLive-ov0.StreamsLive, float64(grew)/(1<<20), float64(counted)/(1<<20), float64(grew)/float64(max(counted, 1)))
	require.LessOrEqual(t, grew, counted+counted/4+8<<20, "the driver grew past what the pool counted by more than a quarter: a model is too low")
	require.NoError(t, part.Close())
	require.NoError(t, lat.Close())

}
