package fcsp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 58 #4 and #5: every reader of the environment reads it by the same
// two rules (internal/environ): the first setting wins, and WithEnviron's
// list overlays the process's environment.
func TestEnvironOverlaysTheProcess(t *testing.T) {
	// #5: a list of HAMi's variables alone; the process says 1.
	t.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
	p, _ := openSim(t, WithEnviron([]string{"CUDA_DEVICE_MEMORY_LIMIT=4g"}))
	require.Equal(t, 1, p.Device().WorkQueues, "the process's setting, which the driver reads")
	require.Equal(t, uint64(4<<30), p.MemoryLimit())
	_, err := p.NewTenant("a", WithSMs(16))
	require.ErrorIs(t, err, ErrFewWorkQueues)

	// #4: set twice, the first wins, for the work queues as for HAMi's
	// variables.
	q, _ := openSim(t, WithEnviron([]string{"CUDA_DEVICE_MAX_CONNECTIONS=16", "CUDA_DEVICE_MAX_CONNECTIONS=1",
		"CUDA_DEVICE_MEMORY_LIMIT=2g", "CUDA_DEVICE_MEMORY_LIMIT=4g"}))
	require.Equal(t, 16, q.Device().WorkQueues)
	require.Equal(t, uint64(2<<30), q.MemoryLimit())
}
