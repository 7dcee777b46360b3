package smpart

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 38: Open says when it runs where partitions cannot hold.
func TestCaveats(t *testing.T) {
	// The process's environment is read under every list: make it say
	// nothing, and point MPS at a folder where no daemon listens.
	t.Setenv("LD_PRELOAD", "")
	t.Setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "")
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", t.TempDir())
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
	l, err := net.Listen("unix", filepath.Join(dir, "control"))
	require.NoError(t, err)
	c = Caveats([]string{"CUDA_MPS_PIPE_DIRECTORY=" + dir})
	require.Len(t, c, 1)
	require.Contains(t, c[0], "MPS daemon listens at "+dir)

	// A daemon that quit leaves its socket behind: no daemon, no caveat
	// (measured on the H100 in run YY: every pool after an MPS layout
	// warned while nothing listened).
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	_, err = os.Stat(filepath.Join(dir, "control"))
	require.NoError(t, err, "the socket file stays")
	require.Empty(t, Caveats([]string{"CUDA_MPS_PIPE_DIRECTORY=" + dir}))
	// A plain file there is no daemon either.
	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "control"), nil, 0o600))
	require.Empty(t, Caveats([]string{"CUDA_MPS_PIPE_DIRECTORY=" + other}))
}

// Caveats reads the list laid over the process's environment
// (internal/environ): what the process sets counts under a list that does
// not set it, and the list's first setting wins.
func TestCaveatsOverlayTheProcess(t *testing.T) {
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", t.TempDir())
	t.Setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "")
	t.Setenv("LD_PRELOAD", "/opt/hami/libvgpu.so")
	c := Caveats([]string{"CUDA_DEVICE_MEMORY_LIMIT=4g"})
	require.Len(t, c, 1)
	require.Contains(t, c[0], "libvgpu.so interposes")
	require.Empty(t, Caveats([]string{"LD_PRELOAD=", "LD_PRELOAD=/opt/hami/libvgpu.so"}), "the list's first setting")
}
