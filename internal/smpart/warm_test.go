package smpart_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// A warm-up runs once in each context: Warm makes the contexts a layout
// may hold and runs it in each not warmed for its id (every layout, or
// the current one); a slot held elsewhere meanwhile is left to WarmOnce;
// a failed run is not recorded; Forget drops the record.
func TestWarmRunsOncePerContext(t *testing.T) {
	_, dev, s := fakeSplit(t, 8)
	p, err := s.TakeLayouts(8, []int{16}, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	p.SetSlots(3)

	runs := map[cuda.Context]int{}
	sizes := map[int]int{}
	f := func(ctx cuda.Context, sms int) error { runs[ctx]++; sizes[sms]++; return nil }
	require.NoError(t, p.Warm(7, 3, true, f))
	require.Len(t, runs, 6)
	require.Equal(t, map[int]int{8: 3, 16: 3}, sizes)
	require.Equal(t, 3, p.Slots(), "every slot of the current layout made")
	require.NoError(t, p.Warm(7, 3, true, f))
	require.Equal(t, map[int]int{8: 3, 16: 3}, sizes, "warmed once")

	// Warm-up 9 while one slot is held: the two others are warmed; the
	// held one by its next taker.
	held, err := p.TryAcquire()
	require.NoError(t, err)
	clear(sizes)
	require.NoError(t, p.Warm(9, 3, false, f))
	require.Equal(t, map[int]int{8: 2}, sizes)
	require.False(t, held.Warmed(9))
	require.NoError(t, held.WarmOnce(9, f))
	require.True(t, held.Warmed(9))
	require.NoError(t, held.WarmOnce(9, f))
	require.Equal(t, map[int]int{8: 3}, sizes)

	boom := errors.New("boom")
	require.ErrorIs(t, held.WarmOnce(11, func(cuda.Context, int) error { return boom }), boom)
	require.False(t, held.Warmed(11), "a failed run is tried again")
	held.Release()

	p.Forget(9)
	require.False(t, held.Warmed(9))
	require.True(t, held.Warmed(7))

	// A recycled partition (a spare) forgets its owner's warm-ups.
	q, err := s.Take(8)
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close()) }()
	require.NoError(t, q.Warm(12, 2, true, f))
	x, err := q.TryAcquire()
	require.NoError(t, err)
	require.True(t, x.Warmed(12))
	x.Release()
	require.NoError(t, q.Reset())
	x, err = q.TryAcquire()
	require.NoError(t, err)
	require.False(t, x.Warmed(12))
	x.Release()

	// The commons on the whole device: one context, shared, warmed once.
	c, err := dev.NewCommons()
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	clear(sizes)
	require.NoError(t, c.Warm(7, 16, false, f))
	require.NoError(t, c.Warm(7, 16, false, f))
	require.Equal(t, map[int]int{132: 1}, sizes)
}
