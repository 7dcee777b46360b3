package place_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// A Frame makes a partition's green context current on a locked thread,
// counts the thread inside, and nests on the slot the thread already holds;
// Leave puts the thread's context back, gives the slot back and unlocks
// the thread, the nested frame first, without giving the outer one's slot.
func TestFrame(t *testing.T) {
	drv, dev, part := open(t)
	part.SetSlots(1)
	green := place.NewGreen(part)
	var threads inside.Threads
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the test's own lock, under the frame's
		defer runtime.UnlockOSThread()
		require.NoError(t, drv.CtxSetCurrent(dev.Primary()))

		var outer place.Frame
		require.NoError(t, outer.Take(context.Background(), green))
		require.NoError(t, outer.Swap(dev, &threads))
		require.Equal(t, osthread.ID(), outer.Thread)
		cur, err := drv.CtxGetCurrent()
		require.NoError(t, err)
		require.Equal(t, outer.Cur, cur)
		require.NotEqual(t, dev.Primary(), cur, "a green context")
		require.True(t, threads.Here())

		var nested place.Frame // every slot is held: this thread's is nested on
		require.NoError(t, nested.Take(context.Background(), green))
		require.NoError(t, nested.Swap(dev, &threads))
		require.Equal(t, outer.Cur, nested.Cur)
		require.NoError(t, nested.Leave(drv))
		require.True(t, threads.Here(), "the outer frame is still inside")
		require.NotNil(t, part.Holding(outer.Thread), "the outer slot is still held")

		require.NoError(t, outer.Leave(drv))
		cur, err = drv.CtxGetCurrent()
		require.NoError(t, err)
		require.Equal(t, dev.Primary(), cur, "the thread's context is back")
		require.False(t, threads.Here())
		require.True(t, threads.Idle())
		require.NoError(t, drv.CtxSetCurrent(0))
	}()
	<-done
	// The slot was given back: a frame on another thread takes it at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fr place.Frame
	require.NoError(t, fr.Take(ctx, green))
	require.NoError(t, fr.Leave(drv))
}

// A Take that fails (ctx ended while every slot is held; the partition
// closed) holds nothing, and Leave only unlocks; a Leave of a frame never
// taken does nothing at all. The whole device's frame holds no slot.
func TestFrameFailedTake(t *testing.T) {
	drv, dev, part := open(t)
	part.SetSlots(1)
	green := place.NewGreen(part)
	held, err := part.Acquire(context.Background()) // on this goroutine: not this frame's thread
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var fr place.Frame
	require.ErrorIs(t, fr.Take(ctx, green), context.Canceled)
	require.NoError(t, fr.Leave(drv))
	held.Release()

	var never place.Frame
	require.NoError(t, never.Leave(drv))

	var threads inside.Threads
	var whole place.Frame
	require.NoError(t, whole.Take(context.Background(), place.Whole{Dev: dev, N: 132}))
	require.NoError(t, whole.Swap(dev, &threads))
	require.Equal(t, dev.Primary(), whole.Cur)
	require.NoError(t, whole.Leave(drv))
	require.True(t, threads.Idle())
	require.NoError(t, drv.CtxSetCurrent(cuda.Context(0)))

	require.NoError(t, part.Close())
	var closed place.Frame
	require.ErrorIs(t, closed.Take(context.Background(), green), errs.ErrClosed)
	require.NoError(t, closed.Leave(drv))
}
