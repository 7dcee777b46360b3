package smpart

import (
	"os"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/stretchr/testify/require"
)

// TestWorkQueues: the variable is read from the environment given, the
// first setting winning as getenv's does (issue 58 #4); unset it is the
// driver's default unless the process's may be set; out of the driver's
// range it is refused.
func TestWorkQueues(t *testing.T) {
	t.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", "")
	os.Unsetenv("CUDA_DEVICE_MAX_CONNECTIONS")
	for env, want := range map[string]int{"CUDA_DEVICE_MAX_CONNECTIONS=16": 16, "CUDA_DEVICE_MAX_CONNECTIONS= 1 ": 1, "OTHER=3": 8, "CUDA_DEVICE_MAX_CONNECTIONS=": 8} {
		n, err := WorkQueues([]string{"A=B", env}, false)
		require.NoError(t, err, env)
		require.Equal(t, want, n, env)
	}
	n, err := WorkQueues([]string{"CUDA_DEVICE_MAX_CONNECTIONS=4", "CUDA_DEVICE_MAX_CONNECTIONS=12"}, false)
	require.NoError(t, err)
	require.Equal(t, 4, n, "the first setting")
	n, err = WorkQueues([]string{"CUDA_DEVICE_MAX_CONNECTIONS=1", "CUDA_DEVICE_MAX_CONNECTIONS=32"}, false)
	require.NoError(t, err)
	require.Equal(t, 1, n, "[=1, =32] is 1, as the caveats check and HAMi's reader say")
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

// Issue 58 #5: a list given to the pool (WithEnviron) that does not set
// the variable overlays the process's environment, which does: the
// process's 1 is what the driver will use, so it is read, and not
// overwritten with 32.
func TestWorkQueuesReadsTheProcessUnderAList(t *testing.T) {
	t.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
	hami := []string{"CUDA_DEVICE_MEMORY_LIMIT=4g", "CUDA_DEVICE_SM_LIMIT=50"}
	n, err := WorkQueues(hami, true)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "1", os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "the process's setting is kept")
	require.ErrorIs(t, CheckWorkQueues(n), errs.ErrFewWorkQueues)

	// A value the list sets is what the pool reads; the driver reads the
	// process's, so on the real driver it is exported there.
	n, err = WorkQueues([]string{"CUDA_DEVICE_MAX_CONNECTIONS=16"}, true)
	require.NoError(t, err)
	require.Equal(t, 16, n)
	require.Equal(t, "16", os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "the list's value, where the driver reads it")
	t.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
	n, err = WorkQueues([]string{"CUDA_DEVICE_MAX_CONNECTIONS=16"}, false)
	require.NoError(t, err)
	require.Equal(t, 16, n)
	require.Equal(t, "1", os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS"), "the simulator's pool writes nothing")
}
