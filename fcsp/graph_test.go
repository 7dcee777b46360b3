package fcsp

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

func chainKernel(t *testing.T, tn *Tenant) *Function {
	t.Helper()
	mod, err := tn.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	return fn
}

func TestCaptureRecordsAndLaunchGraphReplaysOnTheTenant(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16), WithSMLimit(1))
	require.NoError(t, err)
	fn := chainKernel(t, a)
	ctx := context.Background()
	const n, steps = 1000, 20
	buf, err := a.Alloc(ctx, 4*n)
	require.NoError(t, err)
	s, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	var args Args
	args.Ptr(buf).Int32(n).Int32(steps)
	g, err := s.Capture(ctx, func() error {
		for range 3 {
			if err := s.Launch(ctx, fn, Dim3{X: 4, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &args); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, g.Kernels())
	// Captured, not run: the buffer is still zero, nothing counted.
	out := make([]byte, 4*n)
	require.NoError(t, a.CopyFromDevice(out, buf))
	require.Error(t, kernels.CheckChain(out, steps))
	require.Equal(t, 0, drv.StreamLaunches(cuda.Stream(s.Handle())))
	require.Equal(t, uint64(0), a.Stats().Launches)

	e, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close(), "an instantiated graph outlives its graph")
	require.NoError(t, s.LaunchGraph(ctx, e))
	require.NoError(t, s.Synchronize())
	require.NoError(t, a.CopyFromDevice(out, buf))
	require.NoError(t, kernels.CheckChain(out, steps))
	require.Equal(t, 3, drv.StreamLaunches(cuda.Stream(s.Handle())))
	// Replayed on another of the tenant's streams.
	require.NoError(t, a.Stream().LaunchGraph(ctx, e))
	require.Equal(t, 3, drv.StreamLaunches(cuda.Stream(a.Stream().Handle())))
	require.Equal(t, uint64(6), a.Stats().Launches)

	require.NoError(t, e.Close())
	require.NoError(t, e.Close(), "idempotent")
	require.ErrorIs(t, s.LaunchGraph(ctx, e), ErrClosed)
	graphs, execs := drv.Graphs()
	require.Equal(t, [2]int{0, 0}, [2]int{graphs, execs})
}

func TestLaunchGraphIsAdmittedByTheLimiter(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithSMLimit(0.1))
	require.NoError(t, err)
	fn := chainKernel(t, a)
	ctx := context.Background()
	buf, err := a.Alloc(ctx, 4*256)
	require.NoError(t, err)
	var args Args
	args.Ptr(buf).Int32(256).Int32(1)
	g, err := a.Stream().Capture(ctx, func() error {
		return a.Stream().Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &args)
	})
	require.NoError(t, err)
	defer g.Close()
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	require.Greater(t, a.Stream().c.Gate().Rate(e.x.Work().Kernels), 0.0, "cost derived from the captured kernel")
	// A graph dearer than what a short wait earns is not launched.
	// (The bucket may let one dear launch through on credit; the next
	// must wait for it to be paid.)
	require.NoError(t, e.SetCost(1e12))
	admitted := 0
	for range 2 {
		wait, cancel := context.WithTimeout(ctx, 2*time.Millisecond)
		err = a.Stream().LaunchGraph(wait, e)
		cancel()
		if err == nil {
			admitted++
		} else {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
	}
	require.Less(t, admitted, 2)
	require.Equal(t, admitted, drv.StreamLaunches(cuda.Stream(a.Stream().Handle())))
	require.ErrorIs(t, e.SetCost(-1), ErrInvalidArgument)
	require.ErrorIs(t, e.SetCost(math.NaN()), ErrInvalidArgument)
	require.NoError(t, e.SetCost(0))
	if admitted == 0 {
		require.NoError(t, a.Stream().LaunchGraph(ctx, e))
		require.Equal(t, 1, drv.StreamLaunches(cuda.Stream(a.Stream().Handle())))
	}
}

func TestCaptureBadUse(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithSMs(8))
	require.NoError(t, err)
	ctx := context.Background()
	s := a.Stream()
	_, err = s.Capture(ctx, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, s.LaunchGraph(ctx, nil), ErrInvalidArgument)

	// Synchronize on a capturing stream fails as on the driver, and the
	// capture is lost.
	g, err := s.Capture(ctx, func() error { return s.Synchronize() })
	require.ErrorIs(t, err, cuda.ErrorStreamCaptureUnsupported)
	require.Nil(t, g)
	// f's error discards the capture; a nested capture is refused.
	boom := errors.New("boom")
	_, err = s.Capture(ctx, func() error {
		_, err := s.Capture(ctx, func() error { return nil })
		require.ErrorIs(t, err, ErrInvalidArgument)
		return boom
	})
	require.ErrorIs(t, err, boom)
	// A panic ends the capture too, and goes on.
	require.Panics(t, func() { _, _ = s.Capture(ctx, func() error { panic("in capture") }) })
	graphs, execs := drv.Graphs()
	require.Equal(t, [2]int{0, 0}, [2]int{graphs, execs})
	// The stream works normally afterwards.
	g, err = s.Capture(ctx, func() error { return nil })
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	require.ErrorIs(t, b.Stream().LaunchGraph(ctx, e), ErrInvalidArgument)
	require.NoError(t, s.Synchronize())
	require.NoError(t, errors.Join(e.Close(), g.Close()))
	_, err = g.Instantiate()
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, a.Close())
	_, err = s.Capture(ctx, func() error { return nil })
	require.ErrorIs(t, err, ErrClosed)
}

func TestMemsetOnTheStream(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	buf, err := a.Alloc(context.Background(), 64)
	require.NoError(t, err)
	require.NoError(t, a.Stream().MemsetD16(buf, 0x3f80, 16))
	require.NoError(t, a.Stream().MemsetD32(buf+32, 0x01020304, 8))
	out := make([]byte, 64)
	require.NoError(t, a.CopyFromDevice(out, buf))
	require.Equal(t, []byte{0x80, 0x3f, 0x80, 0x3f}, out[:4])
	require.Equal(t, []byte{4, 3, 2, 1}, out[32:36])
	require.ErrorIs(t, a.Stream().MemsetD16(buf, 0, 0), ErrInvalidArgument)
	require.ErrorIs(t, a.Stream().MemsetD16(buf+1, 0, 1), cuda.ErrorInvalidValue)
}
