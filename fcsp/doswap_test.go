package fcsp

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Do's context switch (one CtxSwapCurrent, one CtxSetCurrent to restore):
// on a thread with the primary context current, a partitioned tenant's Do
// makes its green context current and an unpartitioned tenant's Do nested
// in it one of the commons'; each Do puts back what it found. On the fake here,
// on the driver in TestGPUDoSwapsAndRestoresTheThreadsContext.
func TestDoSwapsAndRestoresTheThreadsContext(t *testing.T) {
	p, _ := openSim(t)
	checkDoSwaps(t, p)
}

func TestGPUDoSwapsAndRestoresTheThreadsContext(t *testing.T) {
	checkDoSwaps(t, openGPU(t))
}

func checkDoSwaps(t *testing.T, p *Pool) {
	a, err := p.NewTenant("swap-a", WithSMs(16))
	require.NoError(t, err)
	defer a.Close()
	b, err := p.NewTenant("swap-b")
	require.NoError(t, err)
	defer b.Close()
	drv, primary, green := p.drv, p.dev.Primary(), cuda.Context(a.Context())
	current := func() cuda.Context {
		c, err := drv.CtxGetCurrent()
		require.NoError(t, err)
		return c
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer func() { require.NoError(t, drv.CtxSetCurrent(0)) }()

		// The entry point itself: the previous context back, set only
		// where it differs.
		require.NoError(t, drv.CtxSetCurrent(0))
		prev, thread, err := drv.CtxSwapCurrent(primary)
		require.NoError(t, err)
		require.Zero(t, prev)
		require.Equal(t, unix.Gettid(), thread)
		require.Equal(t, primary, current())
		prev, thread, err = drv.CtxSwapCurrent(primary)
		require.NoError(t, err)
		require.Equal(t, primary, prev)
		require.Equal(t, unix.Gettid(), thread)

		require.NoError(t, a.Do(context.Background(), func(Current) error {
			require.Equal(t, green, current())
			require.NoError(t, b.Do(context.Background(), func(Current) error {
				// Beside a partition, an unpartitioned tenant runs in the
				// commons' green contexts (issue 37), not the primary.
				require.True(t, p.moves.Commons().Owns(current()), "a green context of the commons is current")
				return nil
			}))
			require.Equal(t, green, current(), "the nested Do put the green context back")
			require.NoError(t, a.Do(context.Background(), func(Current) error {
				require.True(t, a.c.partition().Owns(current()), "a nested Do runs in one of the tenant's green contexts")
				return nil
			}))
			require.Equal(t, green, current(), "a nested Do of the same tenant leaves its context current")
			return nil
		}))
		require.Equal(t, primary, current(), "Do put the primary context back")
	}()
	<-done
}
