package fcsp

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// Issue 27 #7: messages carry one prefix and name the tenant once, and the
// public sentinel still matches: a bad HAMi-core setting read
// "fcsp: invalid argument: hamienv: ...", LoadModule on a lost device
// "tenant \"t\": tenant \"t\": fcsp: device lost ...".
func TestMessagesNameThingsOnce(t *testing.T) {
	_, err := openSimErr(0, WithEnviron([]string{"CUDA_DEVICE_MEMORY_LIMIT=lots"}))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NotContains(t, err.Error(), "hamienv:")

	p, drv := openSim(t)
	tn, err := p.NewTenant("t", WithSMs(8))
	require.NoError(t, err)
	fn := spinKernel(t, tn)
	drv.InjectFault(0, cuda.ErrorIllegalAddress)
	var a Args
	a.Uint64(0)
	_ = tn.Stream().Launch(context.Background(), fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 1, Y: 1, Z: 1}, 0, &a)
	_ = tn.Stream().Synchronize()
	_, err = tn.LoadModule(kernels.ChainPTX)
	require.ErrorIs(t, err, ErrDeviceLost)
	require.Equal(t, 1, strings.Count(err.Error(), `tenant "t": `), "the tenant prefixed once: %v", err)
	for _, prefix := range []string{"hamienv:", "memtrack:", "shm:", "greenctx:"} {
		require.NotContains(t, err.Error(), prefix)
	}
	// A quota refusal: the tenant once, no package prefix, the sentinel.
	p2, _ := openSim(t)
	q, err := p2.NewTenant("q", WithMemoryQuota(1<<20))
	require.NoError(t, err)
	_, err = q.Alloc(context.Background(), 2<<20)
	require.ErrorIs(t, err, ErrQuotaExceeded)
	require.NotContains(t, err.Error(), "memtrack:")
	require.Equal(t, 1, strings.Count(err.Error(), `tenant "q"`), err.Error())
}
