package fcsp

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

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
	require.Equal(t, uint64(4<<20), drv.Live().Bytes, "a freed block stays cached in the pool")
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

// TestMemoryPoolFullOfFragmentsIsTheQuota: a pool maps memory in 2 MiB
// granules, so many small blocks fill its maximum size (the quota) while
// few bytes are allocated; that is reported as the tenant's quota, not as
// the device running out.
func TestMemoryPoolFullOfFragmentsIsTheQuota(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithMemoryQuota(8<<20), WithMemoryPool(0))
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		_, err := a.Alloc(context.Background(), 1)
		require.NoError(t, err)
	}
	_, err = a.Alloc(context.Background(), 1)
	require.ErrorIs(t, err, ErrQuotaExceeded)
	require.Contains(t, err.Error(), "its pool holds 8388608 of its 8388608-byte quota (4 allocated")
	require.Equal(t, uint64(4), a.Stats().MemoryUsed, "the refused request left no trace")
}

func TestMemoryPoolTrimsNeighboursWhenTheDeviceIsFull(t *testing.T) {
	p, err := Open(context.Background(), 0, WithSimulator(SimulatedH200().WithMemory(64<<20)))
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
	var wg sync.WaitGroup
	var over atomic.Int64
	errs := make(chan error, 64)
	for g := 0; g < 24; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			tn := tenants[g%len(tenants)]
			r := rand.New(rand.NewPCG(uint64(g), 7))
			var mine []DevicePtr
			for i := 0; i < 400; i++ {
				if len(mine) > 0 && r.IntN(2) == 0 {
					k := r.IntN(len(mine))
					if err := tn.Free(mine[k]); err != nil {
						errs <- err
						return
					}
					mine = append(mine[:k], mine[k+1:]...)
					continue
				}
				ptr, err := tn.Alloc(context.Background(), uint64(1+r.IntN(4<<20)))
				if errors.Is(err, ErrQuotaExceeded) || errors.Is(err, ErrDeviceOutOfMemory) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				mine = append(mine, ptr)
				if tn.Stats().MemoryUsed > quota || p.MemoryUsed() > p.MemoryLimit() {
					over.Add(1)
				}
			}
			for _, ptr := range mine {
				if err := tn.Free(ptr); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Zero(t, over.Load(), "a limit was passed")
	require.Zero(t, p.MemoryUsed())
	for _, tn := range tenants {
		require.Zero(t, tn.Stats().MemoryUsed)
		require.NoError(t, tn.Close())
	}
	require.Zero(t, drv.Live().Bytes)
}
