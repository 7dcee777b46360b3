package fcsp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// On the GPU: a DRA claim's metadata naming GPU 0's UUID (as the driver
// formats it, which is how NVIDIA's DRA driver writes it) opens GPU 0, and
// one naming a UUID no GPU has is ErrDeviceNotVisible. The UUIDs are read
// from the driver itself, so the test holds on any GPU machine.
func TestGPUOpenByDRAMetadata(t *testing.T) {
	p := openGPU(t)
	uuid := p.Device().UUID
	t.Logf("GPU 0: %s", uuid)
	require.NoError(t, p.Close())
	ctx := context.Background()
	q, err := Open(ctx, 0, WithDRAMetadata(draFile(t, uuid)))
	require.NoError(t, err)
	require.Equal(t, uuid, q.Device().UUID)
	require.Equal(t, 0, q.Device().Index)
	require.NoError(t, q.Close())
	_, err = Open(ctx, 0, WithDRAMetadata(draFile(t, "GPU-00000000-1111-2222-3333-444444444444")))
	require.ErrorIs(t, err, ErrDeviceNotVisible)
	t.Logf("absent: %v", err)
}
