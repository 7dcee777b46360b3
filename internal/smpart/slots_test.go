package smpart_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Slots: made on demand up to the limit, each a green context of its own;
// past it callers wait, leave with their ctx, and are woken by Close; a
// reshape moves waiters to the new layout; Close destroys what was made.
func TestSlots(t *testing.T) {
	drv, dev, s := fakeSplit(t, 8)
	p, err := s.TakeLayouts(8, []int{16}, 0)
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
	a, err := p.NewStream()
	require.NoError(t, err)
	require.NoError(t, p.DestroyStream(a))
	b, err := p.NewStream()
	require.NoError(t, err)
	require.Equal(t, a, b, "the idle stream is reused")
	var made []cuda.Stream
	for range 12 {
		x, err := p.NewStream()
		require.NoError(t, err)
		made = append(made, x)
	}
	before := drv.Live().Streams
	for _, x := range made {
		require.NoError(t, p.DestroyStream(x))
	}
	require.Equal(t, before-4, drv.Live().Streams, "8 kept idle, 4 destroyed")
	for range 8 {
		_, err := p.NewStream()
		require.NoError(t, err)
	}
	require.Equal(t, before-4, drv.Live().Streams, "8 reused, none made")
	require.NoError(t, p.Close())
	require.Zero(t, drv.Live().Streams)
}

// refusing is a driver that refuses green contexts past left with err,
// as the pool's meter does past WithGreenContextLimit or the device limit
// (internal/overhead).
type refusing struct {
	cuda.Driver
	left atomic.Int32
	err  error
}

func (r *refusing) GreenCtxCreate(desc cuda.ResourceDesc, dev cuda.Device, flags uint32) (cuda.GreenCtx, error) {
	if r.left.Add(-1) < 0 {
		return 0, r.err
	}
	return r.Driver.GreenCtxCreate(desc, dev, flags)
}

// Issue 54: a Do that would make one more slot where the pool's bound on
// green contexts (or its device memory limit) refuses one waits for the
// slots the layout has, whose limit comes down to them; a warm-up, which
// asked for its count, hears the refusal.
func TestSlotRefusedByTheBoundWaits(t *testing.T) {
	for name, refusal := range map[string]error{
		"green context limit": fmt.Errorf("%w: bound of 2", errs.ErrGreenContextLimit),
		"device memory limit": fmt.Errorf("no room: %w", errs.ErrQuotaExceeded),
	} {
		t.Run(name, func(t *testing.T) {
			drv := &refusing{Driver: fake.New(fake.H200()), err: refusal}
			drv.left.Store(2) // the layout's own context and one slot
			d, err := smpart.Open(drv, 0)
			require.NoError(t, err)
			defer func() { require.NoError(t, d.Close()) }()
			s, err := d.Split(8)
			require.NoError(t, err)
			p, err := s.TakeLayouts(8, nil, 0)
			require.NoError(t, err)
			defer func() { require.NoError(t, p.Close()) }()
			p.SetSlots(4)
			a, err := p.TryAcquire()
			require.NoError(t, err)
			b, err := p.TryAcquire()
			require.NoError(t, err)
			require.NotNil(t, b)
			c, err := p.TryAcquire()
			require.NoError(t, err, "a refused slot is no failure of the caller's")
			require.Nil(t, c)
			require.Equal(t, 2, p.Limit(), "the layout's limit came down to the slots it has")
			got := make(chan error, 1)
			go func() {
				x, err := p.Acquire(context.Background())
				if err == nil {
					x.Release()
				}
				got <- err
			}()
			require.Eventually(t, func() bool { return p.Waiting() == 1 }, 5*time.Second, 50*time.Microsecond)
			a.Release()
			require.NoError(t, <-got, "the waiter got the slot given back")
			b.Release()

			drv.left.Store(0)
			q, err := s.TakeLayouts(8, nil, 0)
			require.ErrorIs(t, err, refusal, "a partition's own context refused: its making fails")
			require.Nil(t, q)
			drv.left.Store(1)
			q, err = s.TakeLayouts(8, nil, 0)
			require.NoError(t, err)
			defer func() { require.NoError(t, q.Close()) }()
			q.SetSlots(4)
			err = q.Warm(1, 4, true, func(cuda.Context, int) error { return nil })
			require.ErrorIs(t, err, refusal, "a warm-up of 4 contexts where 1 can be made")
		})
	}
}
