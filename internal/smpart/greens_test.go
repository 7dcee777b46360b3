package smpart_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// held is the green contexts partitions hold now, across goroutines.
type held struct {
	mu sync.Mutex
	by map[cuda.GreenCtx]bool
}

func (h *held) take(t *testing.T, ps ...*smpart.Partition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range ps {
		g := p.GreenCtx()
		require.False(t, h.by[g], "green context %#x handed to two partitions", g)
		h.by[g] = true
	}
}

func (h *held) give(ps ...*smpart.Partition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range ps {
		delete(h.by, p.GreenCtx())
	}
}

var noneHeld = &held{by: map[cuda.GreenCtx]bool{}}

// greenRound opens a Device beside the ones open, makes a plain partition,
// a reshapable one, the rest and a slot more of each, and closes it all:
// what a pool opened and closed does to green contexts.
func greenRound(t *testing.T, drv cuda.Driver) { greenRoundHeld(t, drv, noneHeld) }

func greenRoundHeld(t *testing.T, drv cuda.Driver, h *held) {
	t.Helper()
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	s, err := d.Split(16)
	require.NoError(t, err)
	a, err := s.Take(16)
	require.NoError(t, err)
	b, err := s.TakeLayouts(16, []int{16, 32}, 0)
	require.NoError(t, err)
	require.Equal(t, 16, a.SMs())
	require.Equal(t, 16, b.SMs())
	h.take(t, a, b)
	h.give(b)
	require.NoError(t, b.Reshape(32, func(old, new cuda.Stream) {}))
	require.Equal(t, 32, b.SMs())
	h.take(t, b)
	c, err := s.TakeRest()
	require.NoError(t, err)
	h.take(t, c)
	for _, p := range []*smpart.Partition{a, b, c} {
		// Two slots held at once: the second is a green context more.
		s1, err := p.TryAcquire()
		require.NoError(t, err)
		s2, err := p.TryAcquire()
		require.NoError(t, err)
		require.NotNil(t, s1)
		require.NotNil(t, s2)
		s1.Release()
		s2.Release()
	}
	h.give(a, b, c)
	for _, p := range []*smpart.Partition{a, b, c} {
		require.NoError(t, p.Close())
	}
	require.NoError(t, d.Close())
}

// Issue 37: each green context made costs the driver memory it keeps while
// the primary context lives (fake.GreenCtxCost, as measured on an H100).
// With a Device holding the primary context (a pool beside), rounds of
// Devices opened and closed must cost it once, not each round.
func TestGreenContextsKeptAcrossDevices(t *testing.T) {
	drv := fake.New(fake.H200())
	holder, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	free := func() uint64 {
		f, _, err := drv.MemGetInfo(holder.Primary())
		require.NoError(t, err)
		return f
	}
	start := free()
	greenRound(t, drv)
	made := drv.Calls("cuGreenCtxCreate")
	afterFirst := free()
	require.Less(t, afterFirst, start, "the fake keeps memory for each green context made")
	for round := 1; round < 6; round++ {
		greenRound(t, drv)
		require.Equal(t, made, drv.Calls("cuGreenCtxCreate"), "round %d made green contexts again", round)
		require.Equal(t, afterFirst, free(), "round %d: device memory lost to the driver (%d MiB)", round, (afterFirst-free())>>20)
	}
	require.Positive(t, drv.Live().GreenCtxs, "kept for the next Device")
	require.NoError(t, holder.Close())
	live := drv.Live()
	require.Zero(t, live.GreenCtxs, "the last Device destroys what was kept")
	require.Zero(t, live.Streams)
	require.Zero(t, live.PrimaryRefs)
}

// A Device closed before its partitions (a misuse the doc forbids) leaks
// no green context: the partition's close fails on its streams (the
// primary context is gone) and destroys its green context, as no Device
// is open to reuse it.
func TestGreenContextsNotKeptWithoutDevice(t *testing.T) {
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	s, err := d.Split(16)
	require.NoError(t, err)
	p, err := s.Take(16)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	require.ErrorIs(t, p.Close(), cuda.ErrorInvalidContext)
	require.Zero(t, drv.Live().GreenCtxs)
}

// Kept green contexts are bounded per device: past the bound they are
// destroyed.
func TestGreenContextsBounded(t *testing.T) {
	defer smpart.SetMaxIdleGreens(2)()
	drv := fake.New(fake.H200())
	holder, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	greenRound(t, drv)
	require.Equal(t, 2, drv.Live().GreenCtxs)
	require.NoError(t, holder.Close())
	require.Zero(t, drv.Live().GreenCtxs)
}

// Devices of one driver opened and closed at once, each making and
// closing partitions, share the kept green contexts; when the last is
// closed none is left and no primary reference is held. No green context
// is held by two partitions at once, and each reads back the SMs it
// asked for.
func TestGreenContextsRace(t *testing.T) {
	drv := fake.New(fake.H200())
	h := &held{by: map[cuda.GreenCtx]bool{}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				greenRoundHeld(t, drv, h)
			}
		}()
	}
	wg.Wait()
	live := drv.Live()
	require.Zero(t, live.GreenCtxs)
	require.Zero(t, live.Streams)
	require.Zero(t, live.PrimaryRefs)
}

// A partition closed while a slot is held (a Do racing the close) does
// not keep that layout's green contexts: the holder may still make one
// current, and the next owner must never share it. A partition closed
// idle keeps them.
func TestGreenContextsHeldAtCloseAreNotKept(t *testing.T) {
	drv, d, s := fakeSplit(t, 16)
	busy, err := s.Take(16)
	require.NoError(t, err)
	idle, err := s.Take(16)
	require.NoError(t, err)
	held, err := busy.TryAcquire()
	require.NoError(t, err)
	require.NotNil(t, held)
	require.NoError(t, busy.Close())
	require.Zero(t, d.KeptGreenCtxs(), "the busy partition's context is destroyed")
	require.NoError(t, idle.Close())
	require.Equal(t, 1, d.KeptGreenCtxs(), "the idle one's is kept")
	require.Equal(t, 1, drv.Live().GreenCtxs)
	held.Release() // after the close, as a racing Do's Leave would
}
