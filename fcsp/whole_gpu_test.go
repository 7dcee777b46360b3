package fcsp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/kernels"
)

// chainRate launches the chain kernel (n elements, steps dependent FMAs
// each) launches times on the tenant's first stream, checks the result, and
// returns the FMA rate on the GPU's clock (FMAs per second).
func chainRate(t *testing.T, tn *Tenant, n, steps, launches int) float64 {
	t.Helper()
	ctx := context.Background()
	mod, err := tn.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	buf, err := tn.Alloc(ctx, uint64(4*n))
	require.NoError(t, err)
	defer func() { require.NoError(t, tn.Free(buf)) }()
	var a Args
	a.Ptr(buf).Int32(int32(n)).Int32(int32(steps))
	grid, block := Dim3{X: uint32((n + 255) / 256), Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}
	// One launch to warm up (module load, clocks), then the timed ones.
	require.NoError(t, tn.Stream().Launch(ctx, fn, grid, block, 0, &a))
	start, err := tn.NewEvent()
	require.NoError(t, err)
	defer start.Close()
	end, err := tn.NewEvent()
	require.NoError(t, err)
	defer end.Close()
	require.NoError(t, start.Record(tn.Stream()))
	for range launches {
		require.NoError(t, tn.Stream().Launch(ctx, fn, grid, block, 0, &a))
	}
	require.NoError(t, end.Record(tn.Stream()))
	require.NoError(t, end.Synchronize())
	d, err := end.Since(start)
	require.NoError(t, err)
	out := make([]byte, 4*n)
	require.NoError(t, tn.CopyFromDevice(out, buf))
	require.NoError(t, kernels.CheckChain(out, steps))
	return float64(n) * float64(steps) * float64(launches) / d.Seconds()
}

// The sizes: 16M elements of 2048 FMAs, 20 launches (about 1 ms a
// launch on the whole H200).
const wholeN, wholeSteps, wholeLaunches = 1 << 24, 2048, 20

// TestGPURestGetsTheWholeDevice: beside a 16-SM tenant the rest tenant gets
// 116 SMs on the H200 (13 groups and the split's remainder), and its chain
// throughput is at least 0.95 x 116/132 of the whole device's, same run.
func TestGPURestGetsTheWholeDevice(t *testing.T) {
	p := openGPU(t)
	whole, err := p.NewTenant("whole")
	require.NoError(t, err)
	all := chainRate(t, whole, wholeN, wholeSteps, wholeLaunches)
	require.NoError(t, whole.Close())
	lat, err := p.NewTenant("interactive", WithSMs(16))
	require.NoError(t, err)
	defer lat.Close()
	rest, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	defer rest.Close()
	got := chainRate(t, rest, wholeN, wholeSteps, wholeLaunches)
	share := float64(rest.SMs()) / float64(p.Device().SMs)
	ratio := got / all
	t.Logf("whole device %d SMs: %.4g FMA/s; rest tenant %d SMs beside 16: %.4g FMA/s; ratio %.3f, SM share %.3f, ratio/share %.3f",
		p.Device().SMs, all, rest.SMs(), got, ratio, share, ratio/share)
	require.Equal(t, p.Device().SMs-16, rest.SMs(), "the rest beside 16 SMs is every other SM, the remainder included")
	if strings.Contains(p.Device().Name, "H200") {
		require.Equal(t, 116, rest.SMs())
	}
	require.GreaterOrEqual(t, ratio, 0.95*share, "the rest tenant's throughput is below 0.95 x its share of the SMs")
}

// TestGPUWithoutCoscheduling measures what ignoring SM co-scheduling costs
// ordinary kernels: chain throughput per SM on a 16-SM tenant and on the
// rest, with and without the flag, and checks the results. Thread-block
// cluster launches (cuLaunchKernelEx) are not measured here.
func TestGPUWithoutCoscheduling(t *testing.T) {
	type result struct{ small, rest, smallSMs, restSMs float64 }
	measure := func(opts ...Option) result {
		p := openGPU(t, opts...)
		defer p.Close()
		small, err := p.NewTenant("small", WithSMs(16))
		require.NoError(t, err)
		defer small.Close()
		rest, err := p.NewTenant("rest", WithRestOfSMs())
		require.NoError(t, err)
		defer rest.Close()
		return result{
			small: chainRate(t, small, wholeN/8, wholeSteps, wholeLaunches), smallSMs: float64(small.SMs()),
			rest: chainRate(t, rest, wholeN, wholeSteps, wholeLaunches), restSMs: float64(rest.SMs()),
		}
	}
	co := measure()
	loose := measure(WithoutCoscheduling())
	t.Logf("16-SM tenant, FMA/s per SM: co-scheduled %.4g, ignoring co-scheduling %.4g (ratio %.3f)",
		co.small/co.smallSMs, loose.small/loose.smallSMs, (loose.small/loose.smallSMs)/(co.small/co.smallSMs))
	t.Logf("rest tenant: co-scheduled %v SMs %.4g FMA/s (%.4g per SM), ignoring co-scheduling %v SMs %.4g FMA/s (%.4g per SM)",
		co.restSMs, co.rest, co.rest/co.restSMs, loose.restSMs, loose.rest, loose.rest/loose.restSMs)
}

// TestGPUReshape: on the GPU, an interactive tenant at 8 SMs grows to 32
// into SMs a batch tenant gives up and back, with work queued across each
// switch, keeping its Stream, Function and buffer; the chain results are
// checked and the switch times logged.
func TestGPUReshape(t *testing.T) {
	p := openGPU(t)
	ctx := context.Background()
	lat, err := p.NewTenant("interactive", WithSMs(8), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	defer lat.Close()
	full := p.Device().SMs - 8
	batch, err := p.NewTenant("batch", WithRestOfSMs(), WithReshapeSizes(full-24))
	require.NoError(t, err)
	defer batch.Close()
	require.Equal(t, full, batch.SMs(), "the rest includes the remainder")
	mod, err := lat.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	const n, steps = 1 << 20, 4096
	buf, err := lat.Alloc(ctx, 4*n)
	require.NoError(t, err)
	var a Args
	a.Ptr(buf).Int32(n).Int32(steps)
	grid, block := Dim3{X: n / 256, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}
	st := lat.Stream()
	timed := func(f func() error) time.Duration {
		start := time.Now()
		require.NoError(t, f())
		return time.Since(start)
	}
	// Queue work, switch, queue more: the second launch must see the first's
	// result (the chain restarts from its inputs, so the values check the
	// ordering only through the final result being complete and right).
	require.NoError(t, st.Launch(ctx, fn, grid, block, 0, &a))
	dShrink := timed(func() error { return batch.Reshape(ctx, full-24) })
	dGrow := timed(func() error { return lat.Reshape(ctx, 32) })
	require.Equal(t, 32, lat.SMs())
	require.Same(t, st, lat.Stream())
	require.NoError(t, st.Launch(ctx, fn, grid, block, 0, &a))
	require.NoError(t, st.Synchronize())
	out := make([]byte, 4*n)
	require.NoError(t, lat.CopyFromDevice(out, buf))
	require.NoError(t, kernels.CheckChain(out, steps))
	r32 := chainRate(t, lat, n, steps, 10)
	dBack := timed(func() error { return lat.Reshape(ctx, 8) })
	r8 := chainRate(t, lat, n, steps, 10)
	require.NoError(t, batch.Reshape(ctx, full))
	t.Logf("switches with work queued: batch %d->%d %v, interactive 8->32 %v, 32->8 %v; chain FMA/s at 32 SMs %.4g, at 8 SMs %.4g (ratio %.2f, SMs ratio 4)",
		full, full-24, dShrink, dGrow, dBack, r32, r8, r32/r8)
	require.Greater(t, r32/r8, 2.0, "32 SMs should compute well over twice as fast as 8")
	require.NoError(t, lat.Free(buf))
}
