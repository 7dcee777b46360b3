package fcsp

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/stretchr/testify/require"
)

func TestMemoryPoolCachesAndTrims(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithMemoryQuota(8<<20), WithMemoryPool(0))
	require.NoError(t, err)
	ctx := context.Background()
	ptr, err := a.Alloc(ctx, 4<<20)
	require.NoError(t, err)
	require.NoError(t, a.Free(ptr))
	require.Zero(t, a.Stats().MemoryUsed)
	require.Equal(t, uint64(cuda.PoolChunk), drv.Live().Bytes, "a freed block stays cached: its pool's chunk stays mapped")
	require.Equal(t, uint64(4<<20), a.Stats().MemoryCached)
	free, total, err := a.MemGetInfo()
	require.NoError(t, err)
	require.Equal(t, uint64(8<<20), total)
	require.Equal(t, uint64(4<<20), free, "cached bytes count against the tenant")

	again, err := a.Alloc(ctx, 4<<20)
	require.NoError(t, err)
	require.Equal(t, ptr, again, "the cached block is reused")
	require.NoError(t, a.Free(again))
	require.NoError(t, a.Trim())
	require.Zero(t, drv.Live().Bytes, "Trim gives cached memory back")

	_, err = a.Alloc(ctx, 9<<20)
	require.ErrorIs(t, err, ErrQuotaExceeded)
	s2, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	q, err := a.AllocAsync(s2, 1<<20)
	require.NoError(t, err)
	require.NoError(t, a.FreeAsync(s2, q))
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	_, err = a.AllocAsync(b.Stream(), 1)
	require.ErrorIs(t, err, ErrInvalidArgument, "another tenant's stream")
	require.NoError(t, a.Close())
	require.Zero(t, drv.Live().Bytes)
}

// TestMemoryPoolFullOfFragmentsIsTheQuota: a pool is an address range of
// the quota's size; blocks in use can leave no gap large enough for a
// request the quota admits. That is reported as the tenant's quota (its pool
// is full), not as the device running out.
func TestMemoryPoolFullOfFragmentsIsTheQuota(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithMemoryQuota(64<<20), WithMemoryPool(0))
	require.NoError(t, err)
	ctx := context.Background()
	var blocks []DevicePtr
	for range 21 { // 63 MiB: as on the H200, 21 blocks of 3 MiB fill a 64 MiB pool
		ptr, err := a.Alloc(ctx, 3<<20)
		require.NoError(t, err)
		blocks = append(blocks, ptr)
	}
	for i := 0; i < len(blocks); i += 2 {
		require.NoError(t, a.Free(blocks[i])) // 3-4 MiB holes between live blocks
	}
	_, err = a.Alloc(ctx, 6<<20) // 30 + 6 MiB is within the quota, but no gap fits
	require.ErrorIs(t, err, ErrQuotaExceeded)
	require.Contains(t, err.Error(), "its pool holds 67108864 of the 67108864 bytes its 67108864-byte quota allows it (31457280 allocated")
	require.Equal(t, uint64(30<<20), a.Stats().MemoryUsed, "the refused request left no trace")
	_, err = a.Alloc(ctx, 3<<20) // a hole of that size is still there
	require.NoError(t, err)
}

func TestMemoryPoolTrimsNeighboursWhenTheDeviceIsFull(t *testing.T) {
	spec := fake.H200()
	spec.TotalMem = 64<<20 + 2*cuda.StreamCost // and the two tenants' streams (PoolStats.Overhead)
	p, err := openSimErr(0, simulator(spec))
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()
	a, err := p.NewTenant("a", WithMemoryPool(0))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithMemoryPool(0))
	require.NoError(t, err)
	ptr, err := a.Alloc(ctx, 48<<20)
	require.NoError(t, err)
	require.NoError(t, a.Free(ptr)) // cached in a's pool: the device has 16 MiB free
	q, err := b.Alloc(ctx, 32<<20)
	require.NoError(t, err, "b's allocation must trim a's cache and succeed")
	require.NoError(t, b.Free(q))
}

// TestMemoryPoolStorm: many goroutines allocate and free random sizes from
// pooled tenants; no tenant ever holds more than its quota, the device total
// never passes its limit, and everything returns to zero.
func TestMemoryPoolStorm(t *testing.T) {
	const quota = 32 << 20
	p, drv := openSim(t, WithDeviceMemoryLimit(80<<20))
	var tenants []*Tenant
	for _, name := range []string{"a", "b", "c"} {
		tn, err := p.NewTenant(name, WithMemoryQuota(quota), WithMemoryPool(0))
		require.NoError(t, err)
		tenants = append(tenants, tn)
	}
	var over, driverOver atomic.Int64
	var maxOver atomic.Uint64
	together(t, 24, func(g int) error {
		tn := tenants[g%len(tenants)]
		r := rand.New(rand.NewPCG(uint64(g), 7))
		var mine []DevicePtr
		for i := 0; i < 400; i++ {
			if len(mine) > 0 && r.IntN(2) == 0 {
				k := r.IntN(len(mine))
				if err := tn.Free(mine[k]); err != nil {
					return err
				}
				mine = append(mine[:k], mine[k+1:]...)
				continue
			}
			ptr, err := tn.Alloc(context.Background(), uint64(1+r.IntN(4<<20)))
			if errors.Is(err, ErrQuotaExceeded) || errors.Is(err, ErrDeviceOutOfMemory) {
				continue
			}
			if err != nil {
				return err
			}
			mine = append(mine, ptr)
			if tn.Stats().MemoryUsed > quota || p.MemoryUsed() > p.MemoryLimit() {
				over.Add(1)
			}
			if d := drv.Live().Bytes; d > p.MemoryLimit() {
				driverOver.Add(1)
				for m := maxOver.Load(); d-p.MemoryLimit() > m && !maxOver.CompareAndSwap(m, d-p.MemoryLimit()); m = maxOver.Load() {
				}
			}
		}
		for _, ptr := range mine {
			if err := tn.Free(ptr); err != nil {
				return err
			}
		}
		return nil
	})
	require.Zero(t, over.Load(), "a limit was passed")
	t.Logf("driver over the limit %d times, by at most %d MiB", driverOver.Load(), maxOver.Load()>>20)
	require.LessOrEqual(t, maxOver.Load(), uint64(2*cuda.PoolChunk), "past the limit by more than the chunks of one allocation tried alone")
	require.Equal(t, drv.Live().Bytes, p.MemoryUsed(), "the device limit counts exactly what the pools map")
	for _, tn := range tenants {
		require.Zero(t, tn.Stats().MemoryUsed)
		require.NoError(t, tn.Close())
	}
	require.Zero(t, p.MemoryUsed())
	require.Zero(t, drv.Live().Bytes)
}

// TestMemoryPoolSmallQuota: a quota below the pool's 32 MiB chunk still
// allocates (the pool may hold one chunk), and the quota still bounds what
// is allocated.
func TestMemoryPoolSmallQuota(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithMemoryQuota(64<<10), WithMemoryPool(0))
	require.NoError(t, err)
	ctx := context.Background()
	for range 4 {
		_, err := a.Alloc(ctx, 16<<10)
		require.NoError(t, err)
	}
	_, err = a.Alloc(ctx, 1)
	require.ErrorIs(t, err, ErrQuotaExceeded)
	require.Contains(t, err.Error(), "65536 of 65536 bytes used")
	require.Equal(t, uint64(64<<10), a.Stats().MemoryUsed)
	require.NoError(t, a.Close())
}
