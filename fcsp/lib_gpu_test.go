package fcsp

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// On the driver: Do makes the green context current on its thread, and
// restores what was current (here: nothing) afterwards.
func TestGPUDoMakesTheGreenContextCurrent(t *testing.T) {
	p := openGPU(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	defer a.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before, err := p.drv.CtxGetCurrent()
		require.NoError(t, err)
		require.NoError(t, a.Do(context.Background(), func(cur Current) error {
			got, err := p.drv.CtxGetCurrent()
			require.Equal(t, cuda.Context(a.Context()), got)
			require.Equal(t, 16, cur.SMs())
			return err
		}))
		after, err := p.drv.CtxGetCurrent()
		require.NoError(t, err)
		require.Equal(t, before, after)
	}()
	<-done
}

// On the driver: a graph captured on a partition's stream (memset + kernels)
// replays there with the right result; Synchronize during capture is
// refused as the fake says.
func TestGPUGraphCaptureAndReplay(t *testing.T) {
	p := openGPU(t)
	a, err := p.NewTenant("a", WithSMs(16), WithSMLimit(1))
	require.NoError(t, err)
	defer a.Close()
	ctx := context.Background()
	mod, err := a.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	const n, steps = 1 << 16, 20
	buf, err := a.Alloc(ctx, 4*n)
	require.NoError(t, err)
	defer a.Free(buf)
	s, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	var args Args
	args.Ptr(buf).Int32(n).Int32(steps)
	g, err := s.Capture(ctx, func() error {
		if err := s.MemsetD32(buf, 0xffffffff, n); err != nil {
			return err
		}
		return s.Launch(ctx, fn, Dim3{X: n / 256, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &args)
	})
	require.NoError(t, err)
	defer g.Close()
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	out := make([]byte, 4*n)
	for range 3 {
		require.NoError(t, s.LaunchGraph(ctx, e))
		require.NoError(t, s.Synchronize())
		require.NoError(t, a.CopyFromDevice(out, buf))
		require.NoError(t, kernels.CheckChain(out, steps))
	}
	_, err = s.Capture(ctx, func() error { return s.Synchronize() })
	require.ErrorIs(t, err, cuda.ErrorStreamCaptureUnsupported)
	require.NoError(t, s.Synchronize(), "the stream works after a failed capture")
}
