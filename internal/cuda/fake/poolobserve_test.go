package fake_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// TestPoolTrimWaitsForTheFreeToBeSeen is what the H200 did (issue 39's
// probe): a block freed with cuMemFreeAsync, on a stream with nothing
// queued, keeps its chunk through cuMemPoolTrimTo, a second trim, a
// successful cuStreamQuery and a completed event alike; after a
// synchronisation the trim gives the chunk back.
func TestPoolTrimWaitsForTheFreeToBeSeen(t *testing.T) {
	drv := fake.New(fake.H200())
	dev, err := drv.DeviceGet(0)
	require.NoError(t, err)
	ctx, err := drv.PrimaryCtxRetain(dev)
	require.NoError(t, err)
	s, err := drv.StreamCreate(ctx, cuda.StreamNonBlocking)
	require.NoError(t, err)
	h, err := drv.MemPoolCreate(ctx, dev, 0)
	require.NoError(t, err)
	reserved := func() uint64 {
		t.Helper()
		require.NoError(t, drv.MemPoolTrimTo(ctx, h, 0))
		r, err := drv.MemPoolGetAttribute(ctx, h, cuda.PoolReservedMemCurrent)
		require.NoError(t, err)
		return r
	}
	p, err := drv.MemAllocFromPoolAsync(ctx, 1<<20, h, s)
	require.NoError(t, err)
	require.NoError(t, drv.MemFreeAsync(ctx, p, s))
	require.Equal(t, uint64(cuda.PoolChunk), reserved(), "a trim right after the free")
	require.Equal(t, uint64(cuda.PoolChunk), reserved(), "a second trim")
	q, err := drv.MemAllocFromPoolAsync(ctx, 1<<20, h, s)
	require.NoError(t, err)
	require.Equal(t, p, q, "the freed block is free to the pool's allocations at once")
	require.NoError(t, drv.MemFreeAsync(ctx, q, s))
	require.NoError(t, drv.StreamSynchronize(ctx, s))
	require.Zero(t, reserved(), "synchronised: the trim gives the chunk back")
	require.NoError(t, drv.MemPoolDestroy(ctx, h))
	require.NoError(t, drv.StreamDestroy(ctx, s))
	require.Zero(t, drv.Live().Bytes)
}
