package fcsp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFreeListsAreStreamOrdered(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithMemoryQuota(64<<20), WithMemoryPool(0))
	require.NoError(t, err)
	ctx := context.Background()
	s2, err := a.NewStream(ClassDefault)
	require.NoError(t, err)

	x, err := a.AllocAsync(s2, 3000)
	require.NoError(t, err)
	require.NoError(t, a.FreeAsync(s2, x))
	require.Equal(t, uint64(3072), a.Stats().MemoryCached, "kept on s2's list, at its class size")
	require.Zero(t, a.Stats().MemoryUsed)

	const op = "cuMemAllocFromPoolAsync"
	calls := drv.Calls(op)
	y, err := a.Alloc(ctx, 3000) // the first stream: s2's block is not in order there
	require.NoError(t, err)
	require.NotEqual(t, x, y)
	require.Equal(t, calls+1, drv.Calls(op), "the driver's pool served the first stream")

	calls = drv.Calls(op)
	z, err := a.AllocAsync(s2, 2900) // same class, same stream: reused without the driver
	require.NoError(t, err)
	require.Equal(t, x, z)
	require.Equal(t, calls, drv.Calls(op), "a cached block costs no driver call")
	require.Zero(t, a.Stats().MemoryCached)
	require.Equal(t, uint64(3000+2900), a.Stats().MemoryUsed, "quota counts what was asked for")

	// A block allocated on one stream and freed on another is kept by the
	// freeing stream.
	require.NoError(t, a.FreeAsync(s2, y))
	require.NoError(t, a.Free(z))
	w, err := a.AllocAsync(s2, 3000)
	require.NoError(t, err)
	require.Equal(t, y, w)
	require.NoError(t, a.FreeAsync(s2, w))

	// Larger than any class: the driver's pool, not the lists.
	big, err := a.AllocAsync(s2, 1<<30+1) // the largest class is 1 GiB
	require.ErrorIs(t, err, ErrQuotaExceeded)
	require.Zero(t, big)

	require.NoError(t, a.Trim())
	require.Zero(t, a.Stats().MemoryCached)
	require.Zero(t, drv.Live().Bytes, "Trim empties the lists and the pool")
	require.NoError(t, a.Close())
}

// TestFreeListsKeepBound: the lists hold at most keep bytes; the rest goes
// back to the driver's pool.
func TestFreeListsKeepBound(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithMemoryQuota(64<<20), WithMemoryPool(2<<20))
	require.NoError(t, err)
	ctx := context.Background()
	var ptrs []DevicePtr
	for range 4 {
		ptr, err := a.Alloc(ctx, 1<<20)
		require.NoError(t, err)
		ptrs = append(ptrs, ptr)
	}
	for _, ptr := range ptrs {
		require.NoError(t, a.Free(ptr))
	}
	require.Equal(t, uint64(2<<20), a.Stats().MemoryCached)
	require.NoError(t, a.Close())
}

// TestFreeListsCloseLeavesNothing: blocks cached on several streams, and
// leaked ones, are all given back when the tenant closes.
func TestFreeListsCloseLeavesNothing(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithMemoryPool(0))
	require.NoError(t, err)
	for range 3 {
		s, err := a.NewStream(ClassDefault)
		require.NoError(t, err)
		x, err := a.AllocAsync(s, 5<<10)
		require.NoError(t, err)
		require.NoError(t, a.FreeAsync(s, x))
		_, err = a.AllocAsync(s, 70<<10) // leaked
		require.NoError(t, err)
	}
	require.NotZero(t, drv.Live().Bytes)
	require.NoError(t, a.Close())
	require.Zero(t, drv.Live().Bytes)
	require.Zero(t, p.MemoryUsed())
}

// TestFreeListsStorm: goroutines on shared and own streams allocate and
// free random sizes; blocks are never handed out twice, the quota holds,
// and everything comes back.
func TestFreeListsStorm(t *testing.T) {
	const quota = 24 << 20
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithMemoryQuota(quota), WithMemoryPool(0))
	require.NoError(t, err)
	var streams []*Stream
	for range 4 {
		s, err := a.NewStream(ClassDefault)
		require.NoError(t, err)
		streams = append(streams, s)
	}
	var (
		owned   owners
		refused atomic.Int64
	)
	together(t, 16, func(g int) error {
		r := rand.New(rand.NewPCG(uint64(g), 3))
		s := streams[g%len(streams)]
		var mine []DevicePtr
		for range 300 {
			if len(mine) > 0 && r.IntN(3) == 0 { // allocate twice as often: each goroutine alone reaches the quota
				k := r.IntN(len(mine))
				owned.give(mine[k])
				if err := a.FreeAsync(s, mine[k]); err != nil {
					return err
				}
				mine = append(mine[:k], mine[k+1:]...)
				continue
			}
			ptr, err := a.AllocAsync(s, uint64(1+r.IntN(1<<20)))
			// The device has room: a full pool is the quota, whatever
			// the other goroutines freed in between.
			if errors.Is(err, ErrQuotaExceeded) {
				refused.Add(1)
				continue
			}
			if err != nil {
				return err
			}
			if err := owned.take(ptr); err != nil {
				return err
			}
			if used := a.Stats().MemoryUsed; used > quota {
				return fmt.Errorf("%d bytes used, quota %d", used, quota)
			}
			mine = append(mine, ptr)
		}
		for _, ptr := range mine {
			owned.give(ptr)
			if err := a.FreeAsync(s, ptr); err != nil {
				return err
			}
		}
		return nil
	})
	require.NotZero(t, refused.Load(), "the storm never reached the quota")
	require.Zero(t, a.Stats().MemoryUsed)
	require.NoError(t, a.Trim())
	require.Zero(t, a.Stats().MemoryCached)
	require.Zero(t, drv.Live().Bytes)
	require.NoError(t, a.Close())
}

// withoutFreeLists gives a pooled tenant the driver's pool alone, for
// benchmarks that show what the free lists add.
func withoutFreeLists() TenantOption {
	return TenantOption{func(c *tenantConfig) error { c.NoLists = true; return nil }}
}

// TestCloseDuringAllocationsLeavesNothing: a tenant closed (say by its
// context) while goroutines still allocate and free leaves no memory behind:
// every allocation either fails with ErrClosed or is freed by Close.
func TestCloseDuringAllocationsLeavesNothing(t *testing.T) {
	for _, opts := range [][]TenantOption{
		{WithSMs(8), WithMemoryPool(0)},
		{WithMemoryPool(0)},
		{WithSMs(8)},
	} {
		for range 10 {
			p, drv := openSim(t)
			tn, err := p.NewTenant("a", opts...)
			require.NoError(t, err)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 9))
					for range 5000 {
						ptr, err := tn.Alloc(context.Background(), uint64(1+r.IntN(1<<20)))
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil {
							panic(err)
						}
						if r.IntN(3) > 0 {
							if err := tn.Free(ptr); err != nil && !errors.Is(err, ErrClosed) {
								panic(err)
							}
						}
					}
				})
			}
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			require.NoError(t, tn.Close())
			wg.Wait()
			require.Zero(t, drv.Live().Bytes, "memory left behind by a Close racing allocations")
			require.Zero(t, p.MemoryUsed())
			require.NoError(t, p.Close())
		}
	}
}

// owners records which blocks are handed out, to catch one handed out
// twice.
type owners struct {
	mu sync.Mutex
	m  map[DevicePtr]bool
}

func (o *owners) take(p DevicePtr) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[DevicePtr]bool{}
	}
	if o.m[p] {
		return fmt.Errorf("block %#x handed out twice", uint64(p))
	}
	o.m[p] = true
	return nil
}

func (o *owners) give(p DevicePtr) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, p)
}
