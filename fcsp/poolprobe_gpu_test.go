package fcsp

import (
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/stretchr/testify/require"
)

// TestGPUPoolProbe: how many blocks a pool of a given maximum size hands out
// before out-of-memory, and what it then holds; on an H200 it must match
// testdata/h200-pool-probe.tsv, which the fake driver replays.
func TestGPUPoolProbe(t *testing.T) {
	p := openGPU(t)
	rows, err := fake.ReadPoolProbes("../testdata/h200-pool-probe.tsv")
	require.NoError(t, err)
	h200 := strings.Contains(p.Device().Name, "H200")
	for _, want := range rows {
		got, err := fake.ProbePool(p.drv, p.dev.Primary(), p.dev.Ordinal(), want.MaxSize, want.Block)
		require.NoError(t, err)
		t.Logf("%d\t%d\t%d\t%d", got.MaxSize, got.Block, got.Blocks, got.Reserved)
		if h200 {
			require.Equal(t, want, got)
		}
	}
}
