package fcsp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 58 #7: a minimum count outside 1 to the device's SMs is an invalid
// argument, saying what is allowed.
func TestSplitTableRefusesCountsOutOfRange(t *testing.T) {
	p, _ := openSim(t)
	for _, n := range []int{0, -1, math.MinInt, p.Device().SMs + 1, math.MaxInt} {
		pr, me, err := p.SplitTable(8, n)
		require.ErrorIs(t, err, ErrInvalidArgument, "%d", n)
		require.ErrorContains(t, err, "ask for 1 to", "%d", n)
		require.Nil(t, pr)
		require.Nil(t, me)
	}
	pr, me, err := p.SplitTable(8, p.Device().SMs)
	require.NoError(t, err)
	require.Len(t, pr, 2)
	require.Len(t, me, 2)
}
