package fcsp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 28: an executable graph keeps the SMs of the context it was
// instantiated in (measured on the H200). Launched after a Reshape, it is
// instantiated again in the tenant's new layout, once; with its Graph
// closed, it is refused with ErrStaleGraph. Before, it was launched as it
// was: onto the old SMs, by then partly the neighbour's.
func TestGraphFollowsAReshape(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16))
	require.NoError(t, err)
	fn := spinKernel(t, a)
	ctx := context.Background()
	var args Args
	args.Uint64(0)
	s := a.Stream()
	g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args) })
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	instantiations := func() int { return drv.GreenContextCalls()["cuGraphInstantiateWithFlags"] }
	require.Equal(t, 1, instantiations())
	require.NoError(t, s.LaunchGraph(ctx, x))
	require.Equal(t, 1, instantiations(), "no Reshape: launched as it is")

	require.NoError(t, a.Reshape(ctx, 16))
	require.NoError(t, s.LaunchGraph(ctx, x))
	require.Equal(t, 2, instantiations(), "instantiated again for the 16-SM layout")
	require.NoError(t, s.LaunchGraph(ctx, x))
	require.Equal(t, 2, instantiations(), "once")
	require.NoError(t, s.Synchronize())

	require.NoError(t, a.Reshape(ctx, 8))
	require.NoError(t, g.Close())
	require.ErrorIs(t, s.LaunchGraph(ctx, x), ErrStaleGraph)
	require.NoError(t, x.Close())
}
