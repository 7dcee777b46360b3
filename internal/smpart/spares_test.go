package smpart_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Spares keep what was asked for, size by size, give a kept size away once,
// and their Close gives every kept SM back to the split.
func TestSpares(t *testing.T) {
	_, _, split := fakeSplit(t, 8)
	free := split.FreeSMs()
	s := smpart.NewSpares([]int{16, 16, 8})
	require.True(t, s.Wants(16))
	require.False(t, s.Wants(24), "a size nobody asked for")
	for _, n := range []int{16, 16, 8} {
		p, err := split.Take(n)
		require.NoError(t, err)
		s.Add(p)
	}
	require.False(t, s.Wants(16), "both 16s are kept")
	require.Equal(t, 3, s.Len())
	require.Equal(t, 40, s.SMs())
	require.Nil(t, s.Take(24))
	p := s.Take(16)
	require.NotNil(t, p)
	require.Equal(t, 16, p.SMs())
	require.True(t, s.Wants(16), "one 16 left of two asked for")
	require.NoError(t, p.Close())
	require.NoError(t, s.Close())
	require.Zero(t, s.Len())
	require.Equal(t, free, split.FreeSMs(), "SMs not given back")
}

// A claim takes out of the spares what TakeFor will use, no more: the
// kept partition of the size asked for, every kept one for the rest, none
// for a reshapable partition or the remainder. TakeFor then empties it.
func TestSparesClaim(t *testing.T) {
	_, _, split := fakeSplit(t, 8)
	s := smpart.NewSpares([]int{16, 8})
	for _, n := range []int{16, 8} {
		p, err := split.Take(n)
		require.NoError(t, err)
		s.Add(p)
	}
	for _, a := range []smpart.Ask{{SMs: 8, Sizes: []int{8, 16}}, {Remainder: true}, {SMs: 24}} {
		c := s.Claim(a)
		require.Zero(t, c.Len(), "%+v", a)
		require.Equal(t, 2, s.Len())
	}
	c := s.Claim(smpart.Ask{SMs: 16})
	require.Equal(t, 1, c.Len())
	require.Equal(t, 1, s.Len())
	p, err := split.TakeFor(c, smpart.Ask{SMs: 16})
	require.NoError(t, err)
	require.Equal(t, 16, p.SMs())
	require.NoError(t, p.Close())

	free := split.FreeSMs()
	c = s.Claim(smpart.Ask{Rest: true})
	require.Equal(t, 1, c.Len())
	require.Zero(t, s.Len(), "the rest claims every spare")
	rest, err := split.TakeFor(c, smpart.Ask{Rest: true})
	require.NoError(t, err)
	require.Equal(t, free+8, rest.SMs(), "the rest holds the closed spare's SMs too")
	require.NoError(t, rest.Close())
}
