package arena

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// What is added and not removed is freed at the end, once; a removed or
// unknown pointer is not the set's; after the end nothing is added.
func TestSet(t *testing.T) {
	var s Set[int]
	require.False(t, s.Remove(1), "never added")
	require.True(t, s.Add(1))
	require.True(t, s.Add(2))
	require.True(t, s.Add(3))
	require.True(t, s.Remove(2))
	require.False(t, s.Remove(2), "removed already")
	require.False(t, s.Ended())

	var freed []int
	bad := errors.New("free failed")
	err := s.End(func(p int) error {
		freed = append(freed, p)
		if p == 3 {
			return bad
		}
		return nil
	})
	require.ErrorIs(t, err, bad)
	slices.Sort(freed)
	require.Equal(t, []int{1, 3}, freed)
	require.True(t, s.Ended())
	require.False(t, s.Add(4), "the set has ended")
	require.False(t, s.Remove(1))
	require.NoError(t, s.End(func(p int) error { t.Errorf("freed %d twice", p); return nil }))
}

// Adds racing with the end: each pointer is either freed by End or
// refused by Add, never both and never neither.
func TestSetRacesEnd(t *testing.T) {
	for range 50 {
		var s Set[int]
		var wg sync.WaitGroup
		refused := make([]bool, 100)
		for i := range refused {
			wg.Go(func() { refused[i] = !s.Add(i) })
		}
		var freed []int // End frees on its own goroutine, one at a time
		wg.Go(func() {
			_ = s.End(func(p int) error {
				freed = append(freed, p)
				return nil
			})
		})
		wg.Wait()
		for _, p := range freed {
			require.False(t, refused[p], "%d freed and refused", p)
		}
		n := len(freed)
		for _, r := range refused {
			if r {
				n++
			}
		}
		require.Equal(t, len(refused), n, "every pointer freed or refused")
	}
}
