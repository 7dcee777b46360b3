package smpart

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 38: Open says when it runs where partitions cannot hold.
func TestCaveats(t *testing.T) {
	require.Empty(t, Caveats([]string{}), "nothing found")
	require.Empty(t, Caveats([]string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", "LD_PRELOAD=/usr/lib/libjemalloc.so"}))

	c := Caveats([]string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12"})
	require.Len(t, c, 1)
	require.Contains(t, c[0], "MPS client at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12")

	c = Caveats([]string{"LD_PRELOAD=/usr/local/vgpu/libvgpu.so:/usr/lib/libfoo.so"})
	require.Len(t, c, 1)
	require.Contains(t, c[0], "libvgpu.so interposes on the CUDA driver")

	// A daemon's control pipe where CUDA_MPS_PIPE_DIRECTORY points.
	dir := t.TempDir()
	require.Empty(t, Caveats([]string{"CUDA_MPS_PIPE_DIRECTORY=" + dir}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "control"), nil, 0o600))
	c = Caveats([]string{"CUDA_MPS_PIPE_DIRECTORY=" + dir})
	require.Len(t, c, 1)
	require.Contains(t, c[0], "MPS daemon listens at "+dir)
}
