package fcsp

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Issue 28 #11: a Do whose function meets a sticky fault still puts the
// thread's context back and gives its green context back; #13: a Current
// kept after its Do returned hands out nothing (it handed out a destroyed
// stream's handle on an unmetered tenant).
func TestDoMeetingAFaultPutsTheThreadBack(t *testing.T) {
	for _, opts := range [][]TenantOption{{WithSMs(8)}, {WithSMs(8), WithGPUMetering()}} {
		p, drv := openSim(t)
		a, err := p.NewTenant("a", opts...)
		require.NoError(t, err)
		fn := spinKernel(t, a)
		runtime.LockOSThread()
		require.NoError(t, drv.CtxSetCurrent(p.dev.Primary()))
		var kept Current
		err = a.Do(context.Background(), func(cur Current) error {
			kept = cur
			if _, err := cur.Stream(nil); err != nil {
				return err
			}
			drv.InjectFault(0, cuda.ErrorIllegalAddress)
			var args Args
			args.Uint64(0)
			_ = a.Stream().Launch(context.Background(), fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 1, Y: 1, Z: 1}, 0, &args)
			return a.Stream().Synchronize()
		})
		require.ErrorIs(t, err, ErrDeviceLost)
		got, gerr := drv.CtxGetCurrent()
		require.NoError(t, gerr)
		// The lost device refuses the previous context (as the driver
		// answers most calls after a sticky error): none is left current,
		// never the green one, which another Do may take.
		require.Contains(t, []cuda.Context{p.dev.Primary(), 0}, got, "a green context left current on the thread")
		runtime.UnlockOSThread()
		require.Zero(t, a.c.partition().Waiting())
		_, err = kept.Stream(nil)
		require.ErrorIs(t, err, ErrInvalidArgument, "a Current kept after its Do handed out a handle")
		require.NoError(t, p.Close())
		require.Zero(t, drv.Overlaps())
	}
}
