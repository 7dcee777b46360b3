package greenctx_test

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/greenctx"
)

// gpuSkips counts the GPU tests that skipped for want of a driver, so that
// TestMain can say so in one line: t.Skip's reason shows only with -v.
var gpuSkips struct {
	sync.Mutex
	n      int
	reason string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if gpuSkips.n > 0 {
		fmt.Printf("greenctx: %d GPU tests skipped: %s; run scripts/gpu-test.sh on a GPU machine\n", gpuSkips.n, gpuSkips.reason)
	}
	os.Exit(code)
}

// TestGPUPublicSplit runs the facade on the real driver: the split table as
// predicted and as made, and a partition beside the rest of the device.
func TestGPUPublicSplit(t *testing.T) {
	dev, err := greenctx.Open(0)
	if errors.Is(err, greenctx.ErrNoDriver) {
		gpuSkips.Lock()
		gpuSkips.n++
		gpuSkips.reason = err.Error()
		gpuSkips.Unlock()
		t.Skipf("no NVIDIA driver on this machine (%v): GPU test skipped", err)
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
