package smpart_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Spares keep what was asked for, size by size, give a kept size away once,
// and their Close gives every kept SM back to the split.
func TestSpares(t *testing.T) {
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer d.Close()
	split, err := d.Split(8)
	require.NoError(t, err)
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
