package greenctx_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/gpuskip"
)

// gpuSkips says in one line when the package's tests end how many GPU tests
// skipped for want of a driver.
var gpuSkips gpuskip.Counter

func TestMain(m *testing.M) { gpuSkips.Main(m, "greenctx") }

// TestGPUPublicSplit runs the facade on the real driver: the split table as
// predicted and as made, and a partition beside the rest of the device.
func TestGPUPublicSplit(t *testing.T) {
	dev, err := greenctx.Open(0)
	if errors.Is(err, greenctx.ErrNoDriver) {
		gpuSkips.Skip(t, err)
	}
	require.NoError(t, err)
	defer func() { require.NoError(t, dev.Close()) }()
	t.Logf("%v", dev)

	var counts []int
	for _, m := range referenceMinCounts {
		if m <= dev.SMs() {
			counts = append(counts, m)
		}
	}
	pred, meas, err := dev.Table(counts...)
	require.NoError(t, err)
	require.Equal(t, pred, meas, "the SDK predicted a different split than the driver made")
	if dev.SMs() == 132 { // the H200 (and H100 SXM): the recorded table
		require.Equal(t, readSplitTable(t, "../testdata/h200-split.tsv"), meas)
	}

	s, err := dev.Split(dev.Granularity())
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	g := s.GroupSMs()
	a, err := s.Take(2 * g)
	require.NoError(t, err)
	require.Equal(t, 2*g, a.SMs())
	rest, err := s.TakeRest()
	require.NoError(t, err)
	require.Equal(t, dev.SMs(), a.SMs()+rest.SMs(), "partition and rest do not cover the device once")
	require.NotEqual(t, a.Stream(), rest.Stream())
	require.NotZero(t, a.Stream())
	require.NotZero(t, a.Context())
	_, err = s.Take(g)
	require.ErrorIs(t, err, greenctx.ErrInsufficientSMs)
	require.NoError(t, a.Close())
	require.Equal(t, 2*g, s.FreeSMs())
}
