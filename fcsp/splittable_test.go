package fcsp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// SplitTable answers for the split the pool makes: with
// WithoutCoscheduling the H200 cuts 16 groups of 8 and leaves 4 (15 and 12
// co-scheduled), both predicted and measured.
func TestSplitTableFollowsWithoutCoscheduling(t *testing.T) {
	p, _ := openSim(t, WithoutCoscheduling())
	pred, meas, err := p.SplitTable(8, 64)
	require.NoError(t, err)
	want := []SplitRow{{MinCount: 8, Groups: 16, GroupSMs: 8, Remainder: 4}, {MinCount: 64, Groups: 2, GroupSMs: 64, Remainder: 4}}
	require.Equal(t, want, meas)
	require.Equal(t, want, pred)
	// As the pool's split is: WithRestOfSMs beside 8 SMs gets the rest.
	_, err = p.NewTenant("i", WithSMs(8))
	require.NoError(t, err)
	rest, err := p.NewTenant("b", WithRestOfSMs())
	require.NoError(t, err)
	require.Equal(t, 132-8, rest.SMs())
}

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
