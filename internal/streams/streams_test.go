package streams

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/graphs"
	"github.com/fcsp-go/fcsp-go/internal/modules"
	"github.com/fcsp-go/fcsp-go/stream"
)

// A handle names one life: once it has ended, its calls are refused, and
// the end waits for the calls that acquired before it.
func TestExpireWaitsForTheCallsOfItsLife(t *testing.T) {
	var c Core
	gen := c.Gen()
	require.True(t, c.Acquire(gen))
	var expired atomic.Bool
	go func() {
		c.Expire(false)
		expired.Store(true)
	}()
	time.Sleep(5 * time.Millisecond)
	require.False(t, expired.Load(), "Expire returned with a call of the life under way")
	c.Release()
	require.Eventually(t, expired.Load, time.Second, time.Millisecond)
	require.False(t, c.Acquire(gen), "a handle of the ended life was let through")
	require.True(t, c.Acquire(c.Gen()), "a handle of the new life was refused")
	c.Expire(true) // the caller is one of its calls, and leaves
	require.Zero(t, c.inflight.Load())
}

// Retire clears everything a next stream must not see, and keeps the
// life ended.
func TestRetireClearsTheCore(t *testing.T) {
	var c Core
	c.Set(7, stream.Attention, true, true, nil, nil)
	gen := c.Gen()
	c.launches.Add(3)
	c.last.Store(&modules.Kernel{Name: "k"})
	c.closed.Store(true)
	require.Equal(t, uint64(7), uint64(c.Handle()))
	require.True(t, c.Retire(false))
	require.NotEqual(t, gen, c.Gen())
	require.Zero(t, c.Handle())
	require.Equal(t, stream.Default, c.Class())
	require.Zero(t, c.Launches())
	require.Nil(t, c.Last())
	require.False(t, c.Closed())
	require.False(t, c.Own())
}

// The watchdog's look is counted as a call, and refused where it would
// break a capture or where the stream closes; a capture waits for a look
// under way.
func TestWatchAndCapture(t *testing.T) {
	var c Core
	gen := c.Gen()
	require.True(t, c.Watch(gen))
	require.Equal(t, int32(1), c.inflight.Load())
	var began atomic.Bool
	rec := &graphs.Recording{}
	go func() {
		began.Store(c.BeginCapture(rec))
	}()
	time.Sleep(5 * time.Millisecond)
	require.False(t, began.Load(), "a capture began while the watchdog looked")
	c.Unwatch()
	require.Eventually(t, began.Load, time.Second, time.Millisecond)
	require.Zero(t, c.inflight.Load())
	require.True(t, c.Capturing())
	require.False(t, c.BeginCapture(&graphs.Recording{}), "a second capture began")
	require.False(t, c.Watch(gen), "the watchdog looked at a capturing stream")
	require.Zero(t, c.inflight.Load())
	c.EndCapture()
	require.True(t, c.Watch(gen))
	c.Unwatch()
	c.Expire(false)
	require.False(t, c.Watch(gen), "the watchdog looked at an ended life")
	require.Zero(t, c.inflight.Load())
}

// A Reshape's switch moves only the placement's own streams.
func TestSwapMovesThePlacementsOwn(t *testing.T) {
	var own, adopted Core
	own.Set(1, stream.Default, true, true, nil, nil)
	adopted.Set(1, stream.Default, false, false, nil, nil)
	own.Swap(1, 2)
	adopted.Swap(1, 2)
	require.Equal(t, uint64(2), uint64(own.Handle()))
	require.Equal(t, uint64(1), uint64(adopted.Handle()))
}
