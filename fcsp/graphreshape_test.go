package fcsp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 28: an executable graph runs on the SMs it was captured for
// (measured on the H200; instantiating it again in the new layout does not
// move it). Launched after its tenant's Reshape it is refused with
// ErrStaleGraph, before the driver sees it; one captured after the Reshape
// runs. Before, it was launched as it was: onto the old SMs, by then partly
// the neighbour's.
func TestGraphFollowsAReshape(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16))
	require.NoError(t, err)
	fn := spinKernel(t, a)
	ctx := context.Background()
	var args Args
	args.Uint64(0)
	s := a.Stream()
	capture := func() *GraphExec {
		g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args) })
		require.NoError(t, err)
		x, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, g.Close())
		return x
	}
	x := capture()
	require.NoError(t, s.LaunchGraph(ctx, x))
	require.NoError(t, s.Synchronize())
	old, launches := s.c.h(), drv.StreamLaunches(s.c.h())

	require.NoError(t, a.Reshape(ctx, 16))
	err = s.LaunchGraph(ctx, x)
	require.ErrorIs(t, err, ErrStaleGraph)
	require.ErrorContains(t, err, "capture it again")
	require.Equal(t, launches, drv.StreamLaunches(old), "a stale graph reached the driver")
	require.Zero(t, drv.StreamLaunches(s.c.h()), "a stale graph reached the driver")
	y := capture()
	require.NoError(t, s.LaunchGraph(ctx, y))
	require.NoError(t, a.Reshape(ctx, 8))
	require.ErrorIs(t, s.LaunchGraph(ctx, y), ErrStaleGraph)
	require.NoError(t, x.Close())
	require.NoError(t, y.Close())
}
