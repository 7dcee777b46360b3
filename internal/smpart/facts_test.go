package smpart_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

func TestFacts(t *testing.T) {
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer d.Close()
	f, err := d.Facts()
	require.NoError(t, err)
	require.Equal(t, smpart.Facts{
		Name: "NVIDIA H200", UUID: "GPU-66616b65-2d67-7075-2d75-7569642d0000", ComputeCapability: "90",
		ThreadsPerSM: 2048, TotalMemory: 143771 << 20, Driver: drv.Name(),
	}, f)
}

// RestoreCurrent puts back the context SwapCurrent replaced, and leaves
// none current where the driver refuses.
func TestSwapAndRestoreCurrent(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer d.Close()
	prev, _, err := d.SwapCurrent(d.Primary())
	require.NoError(t, err)
	require.NoError(t, d.RestoreCurrent(prev, d.Primary()))
	got, err := drv.CtxGetCurrent()
	require.NoError(t, err)
	require.Equal(t, prev, got)

	_, _, err = d.SwapCurrent(d.Primary())
	require.NoError(t, err)
	drv.FailNext("cuCtxSetCurrent", cuda.ErrorInvalidContext)
	require.ErrorIs(t, d.RestoreCurrent(cuda.Context(0x1), d.Primary()), cuda.ErrorInvalidContext)
	got, err = drv.CtxGetCurrent()
	require.NoError(t, err)
	require.Zero(t, got, "a refused restore left the swapped-in context current")
}
