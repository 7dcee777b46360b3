package fake_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// entry points added for dofast

// CtxSwapCurrent is get, then set where they differ, on the calling
// thread; the driver sees (and fails) each under its own name.
func TestCtxSwapCurrentAsGetThenSet(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d := fake.New(fake.H200())
	dev, err := d.DeviceGet(0)
	require.NoError(t, err)
	ctx, err := d.PrimaryCtxRetain(dev)
	require.NoError(t, err)

	prev, thread, err := d.CtxSwapCurrent(ctx)
	require.NoError(t, err)
	require.Zero(t, prev)
	require.Equal(t, unix.Gettid(), thread)
	cur, err := d.CtxGetCurrent()
	require.NoError(t, err)
	require.Equal(t, ctx, cur)
	require.Equal(t, 1, d.Calls("cuCtxSetCurrent"))

	prev, _, err = d.CtxSwapCurrent(ctx)
	require.NoError(t, err)
	require.Equal(t, ctx, prev)
	require.Equal(t, 1, d.Calls("cuCtxSetCurrent"), "already current: nothing set")

	require.NoError(t, d.CtxSetCurrent(0))
	d.FailNext("cuCtxSetCurrent", cuda.ErrorInvalidContext)
	_, _, err = d.CtxSwapCurrent(ctx)
	require.ErrorIs(t, err, cuda.ErrorInvalidContext)
	d.FailNext("cuCtxGetCurrent", cuda.ErrorInvalidContext)
	_, _, err = d.CtxSwapCurrent(ctx)
	require.ErrorIs(t, err, cuda.ErrorInvalidContext)
	cur, err = d.CtxGetCurrent()
	require.NoError(t, err)
	require.Zero(t, cur, "a failed swap leaves the thread as it was")
	_, _, err = d.CtxSwapCurrent(0x7777)
	require.ErrorIs(t, err, cuda.ErrorInvalidContext, "an unknown context")
}
