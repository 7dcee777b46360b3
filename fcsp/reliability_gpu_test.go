package fcsp

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// TestGPUShutdownOrder is issue 20's item 1 on the H200: tenants made
// WithContext (partitioned, shared, pooled) whose contexts are cancelled
// just before Pool.Close, with a shared region. Close must return with the
// device's memory back and the region at zero, round after round.
func TestGPUShutdownOrder(t *testing.T) {
	region := filepath.Join(t.TempDir(), "region")
	// A bare Device beside the pools (one pool at a time hands out a
	// device's SMs) holds the primary context and reads the device's free
	// memory.
	drv, err := cuda.Load()
	if err != nil {
		skipGPU(t, err)
	}
	probe, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer probe.Close()
	memFree := func() uint64 {
		f, _, err := drv.MemGetInfo(probe.Primary())
		require.NoError(t, err)
		return f
	}
	before := memFree()
	for round := range 10 {
		p, err := Open(context.Background(), 0, WithSharedRegion(region))
		require.NoError(t, err)
		var cancels []context.CancelFunc
		for i, opts := range [][]TenantOption{{WithSMs(16)}, {}, {WithMemoryPool(0), WithMemoryQuota(1 << 30)}} {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			tn, err := p.NewTenant(string(rune('a'+i)), append(opts, WithContext(ctx))...)
			require.NoError(t, err)
			for range 8 {
				ptr, err := tn.Alloc(context.Background(), 32<<20)
				require.NoError(t, err)
				if i == 2 {
					require.NoError(t, tn.Free(ptr)) // cached on the free list
				}
			}
		}
		for _, c := range cancels {
			c()
		}
		require.NoError(t, p.Close(), "round %d", round)
		require.Zero(t, p.MemoryUsed(), "round %d", round)
		after := memFree()
		require.InDelta(t, float64(before), float64(after), 64<<20, "round %d: device free memory before %d after %d", round, before, after)
	}
}

// TestGPUPooledCachesUnderDeviceLimit is item 5 on the H200: what a pooled
// tenant keeps after Free counts against WithDeviceMemoryLimit, and another
// tenant reaching the limit has it trimmed, so the driver holds about the
// limit, not the limit plus the cache.
func TestGPUPooledCachesUnderDeviceLimit(t *testing.T) {
	const limit = 1 << 30
	p := openGPU(t, WithDeviceMemoryLimit(limit))
	a, err := p.NewTenant("a", WithMemoryPool(0), WithMemoryQuota(limit))
	require.NoError(t, err)
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	var ptrs []DevicePtr
	for range 28 {
		ptr, err := a.Alloc(context.Background(), 32<<20)
		require.NoError(t, err)
		ptrs = append(ptrs, ptr)
	}
	for _, ptr := range ptrs {
		require.NoError(t, a.Free(ptr))
	}
	require.NotZero(t, a.Stats().MemoryCached)
	var mine uint64
	for i := range 28 {
		_, err := b.Alloc(context.Background(), 32<<20)
		require.NoError(t, err, "allocation %d of b", i)
		mine += 32 << 20
		held, err := a.c.mem.Reserved()
		require.NoError(t, err)
		// One pool chunk of slack: the driver maps pools in 32 MiB chunks.
		require.LessOrEqual(t, held+mine, uint64(limit+cuda.PoolChunk), "after allocation %d: a's pool holds %d, b %d", i, held, mine)
	}
}
