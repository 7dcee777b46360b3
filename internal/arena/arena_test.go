package arena

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/errs"
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
		return errs.ErrClosed // the owner's close freed it: not an error
	})
	require.ErrorIs(t, err, bad)
	require.NotErrorIs(t, err, errs.ErrClosed)
	slices.Sort(freed)
	require.Equal(t, []int{1, 3}, freed)
	require.True(t, s.Ended())
	require.False(t, s.Add(4), "the set has ended")
	require.False(t, s.Remove(1))
	require.NoError(t, s.End(func(p int) error { t.Errorf("freed %d twice", p); return nil }))
}

// Alloc records what it allocates; once the set has ended it allocates
// nothing, and what an allocation racing the end made is freed: each is
// ErrEnded (an ErrClosed). alloc's error is returned as it is.
func TestAlloc(t *testing.T) {
	var s Set[int]
	p, err := s.Alloc(func() (int, error) { return 1, nil }, nil)
	require.NoError(t, err)
	require.Equal(t, 1, p)
	bad := errors.New("alloc failed")
	_, err = s.Alloc(func() (int, error) { return 0, bad }, nil)
	require.Same(t, bad, err)
	var freed []int
	_, err = s.Alloc(func() (int, error) {
		require.NoError(t, s.End(func(p int) error { freed = append(freed, p); return nil }))
		return 2, nil
	}, func(p int) error { freed = append(freed, p); return nil })
	require.ErrorIs(t, err, ErrEnded)
	require.ErrorIs(t, ErrEnded, errs.ErrClosed)
	require.Equal(t, []int{1, 2}, freed, "the set's at its end, then the racing one")
	_, err = s.Alloc(func() (int, error) { t.Error("allocated after the end"); return 3, nil }, nil)
	require.ErrorIs(t, err, ErrEnded)
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
