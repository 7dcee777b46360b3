package fcsp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/greenctx"
)

// Issue 52 on the device: one SM map per device and process. A second
// pool (or a greenctx.Device) on the device a pool holds is refused with
// ErrDeviceInUse, whose two splits would have handed the same SMs out
// twice; the first pool's 64-SM partition runs on 64 SMs of its own
// (%smid), and once it is closed the device opens again.
func TestGPUSecondPoolOnADeviceIsRefused(t *testing.T) {
	p := openGPU(t)
	a, err := p.NewTenant("a", WithSMs(64))
	require.NoError(t, err)
	_, err = Open(context.Background(), 0)
	require.ErrorIs(t, err, ErrDeviceInUse)
	t.Logf("a second pool: %v", err)
	_, err = greenctx.Open(0)
	require.ErrorIs(t, err, ErrDeviceInUse)
	r, err := p.ProbeSMs(context.Background())
	require.NoError(t, err)
	require.Len(t, r.SMs["a"], 64)
	require.True(t, r.Confined(), "%v", r.Breaches)
	require.NoError(t, a.Close())
	require.NoError(t, p.Close())
	again, err := Open(context.Background(), 0)
	require.NoError(t, err, "the device opens again once the first pool is closed")
	require.NoError(t, again.Close())
}
