package smpart

import (
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/stretchr/testify/require"
)

// TestWorkQueues: the variable is read from the environment given, the last
// setting winning as in the process's; unset it is the driver's default
// unless the process's may be set; out of the driver's range it is refused.
func TestWorkQueues(t *testing.T) {
	for env, want := range map[string]int{"CUDA_DEVICE_MAX_CONNECTIONS=16": 16, "CUDA_DEVICE_MAX_CONNECTIONS= 1 ": 1, "OTHER=3": 8, "CUDA_DEVICE_MAX_CONNECTIONS=": 8} {
		n, err := WorkQueues([]string{"A=B", env}, false)
		require.NoError(t, err, env)
		require.Equal(t, want, n, env)
	}
	n, err := WorkQueues([]string{"CUDA_DEVICE_MAX_CONNECTIONS=4", "CUDA_DEVICE_MAX_CONNECTIONS=12"}, false)
	require.NoError(t, err)
	require.Equal(t, 12, n)
	for _, bad := range []string{"0", "33", "many", "-1"} {
		_, err := WorkQueues([]string{"CUDA_DEVICE_MAX_CONNECTIONS=" + bad}, false)
		require.ErrorIs(t, err, errs.ErrInvalidArgument, bad)
		require.ErrorContains(t, err, "1 to 32", bad)
	}
	t.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", "")
	n, err = WorkQueues(nil, true)
	require.NoError(t, err)
	require.Equal(t, WorkQueuesWanted, n, "unset in the process: asked for")
	n, err = WorkQueues(nil, false)
	require.NoError(t, err)
	require.Equal(t, WorkQueuesWanted, n, "as the process's environment now says")
}
