package smpart_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Slots: made on demand up to the limit, each a green context of its own;
// past it callers wait, leave with their ctx, and are woken by Close; a
// reshape moves waiters to the new layout; Close destroys what was made.
func TestSlots(t *testing.T) {
	drv, dev, s := fakeSplit(t, 8)
	p, err := s.TakeLayouts(8, []int{16})
	require.NoError(t, err)
	p.SetSlots(3)

	var held []*smpart.Slot
	for range 3 {
		x, err := p.TryAcquire()
		require.NoError(t, err)
		require.NotNil(t, x)
		require.True(t, p.Owns(x.Context()))
		held = append(held, x)
	}
	require.NotEqual(t, held[0].Context(), held[1].Context())
	require.NotEqual(t, held[1].Context(), held[2].Context())
	x, err := p.TryAcquire()
	require.NoError(t, err)
	require.Nil(t, x, "past the limit TryAcquire makes no slot")

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, err = p.Acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A waiter on the 8-SM layout moves to the 16-SM one when it becomes
	// current, and gets one of its slots.
	got := make(chan *smpart.Slot, 1)
	go func() {
		x, err := p.Acquire(context.Background())
		require.NoError(t, err)
		got <- x
	}()
	require.Eventually(t, func() bool { return p.Waiting() == 1 }, 5*time.Second, 50*time.Microsecond)
	require.NoError(t, p.Reshape(16, nil))
	x = <-got
	require.Equal(t, 16, p.SMs())
	require.True(t, p.Owns(x.Context()))
	for _, h := range held {
		require.NotEqual(t, h.Context(), x.Context(), "a slot of the old layout")
		h.Release()
	}
	x.Release()

	// Close wakes a waiter with ErrClosed. (A lower limit makes no more
	// slots; those made stay: hold all of them but y.)
	p.SetSlots(1)
	var y *smpart.Slot
	for {
		x, err := p.TryAcquire()
		require.NoError(t, err)
		if x == nil {
			break
		}
		if y != nil {
			defer y.Release()
		}
		y = x
	}
	woken := make(chan error, 1)
	go func() { _, err := p.Acquire(context.Background()); woken <- err }()
	require.Eventually(t, func() bool { return p.Waiting() == 1 }, 5*time.Second, 50*time.Microsecond)
	y.Release()
	require.NoError(t, <-woken) // the freed slot went to the waiter
	z, err := p.TryAcquire()
	require.NoError(t, err)
	require.Nil(t, z, "the waiter holds the only slot")
	go func() { _, err := p.Acquire(context.Background()); woken <- err }()
	require.Eventually(t, func() bool { return p.Waiting() == 1 }, 5*time.Second, 50*time.Microsecond)
	require.NoError(t, p.Close())
	require.ErrorIs(t, <-woken, smpart.ErrClosed)
	_, err = p.TryAcquire()
	require.ErrorIs(t, err, smpart.ErrClosed)
	require.Equal(t, dev.KeptGreenCtxs(), drv.Live().GreenCtxs, "every slot's green context was let go (kept for reuse)")
	w := p.Waits()
	require.Equal(t, uint64(2), w.Waited)
}

// Many callers over few slots: a slot is never held twice at once, none
// is lost (every caller gets through), and the limit holds.
func TestSlotsUnderContention(t *testing.T) {
	_, _, s := fakeSplit(t, 8)
	p, err := s.Take(16)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	p.SetSlots(3)
	var inUse sync.Map
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range 500 {
				x, err := p.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if _, twice := inUse.LoadOrStore(x, true); twice {
					t.Error("a slot held twice at once")
				}
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if i%7 == 0 {
					runtime.Gosched()
				}
				holders.Add(-1)
				inUse.Delete(x)
				x.Release()
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, most.Load(), int32(3))
	require.Equal(t, uint64(16*500), p.Waits().Calls)
}

// A stream closed by its owner is kept idle (up to a few) and handed to the
// next NewStream, so a server making a stream per request makes no driver
// call for it; past the few, it is destroyed; Close destroys the idle ones.
func TestIdleStreamsAreReused(t *testing.T) {
	drv, _, s := fakeSplit(t, 8)
	p, err := s.Take(16)
	require.NoError(t, err)
	a, err := p.NewStream(0)
	require.NoError(t, err)
	require.NoError(t, p.DestroyStream(a))
	b, err := p.NewStream(0)
	require.NoError(t, err)
	require.Equal(t, a, b, "the idle stream is reused")
	var made []cuda.Stream
	for range 12 {
		x, err := p.NewStream(0)
		require.NoError(t, err)
		made = append(made, x)
	}
	before := drv.Live().Streams
	for _, x := range made {
		require.NoError(t, p.DestroyStream(x))
	}
	require.Equal(t, before-4, drv.Live().Streams, "8 kept idle, 4 destroyed")
	for range 8 {
		_, err := p.NewStream(0)
		require.NoError(t, err)
	}
	require.Equal(t, before-4, drv.Live().Streams, "8 reused, none made")
	require.NoError(t, p.Close())
	require.Zero(t, drv.Live().Streams)
}
