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

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Issue 39, item 3: what the tenants' pools map counts against the device
// limit. Sixteen pooled tenants under a 256 MiB limit allocate 1 MiB each,
// then more until every one is refused: the driver's memory never grows
// past the limit, Pool.MemoryUsed covers what the driver holds, and every
// refusal is typed.
func TestPoolChunksStayWithinTheDeviceLimit(t *testing.T) {
	const limit = 256 << 20
	p, drv := openSim(t, WithDeviceMemoryLimit(limit))
	base := drv.Live().Bytes
	var tenants []*Tenant
	for i := range 16 {
		tn, err := p.NewTenant(fmt.Sprint("t", i))
		require.NoError(t, err)
		tenants = append(tenants, tn)
	}
	ctx := context.Background()
	var most, short uint64 // the driver's most, and MemoryUsed's largest shortfall
	check := func() {
		grown := drv.Live().Bytes - base
		most = max(most, grown)
		if used := p.MemoryUsed(); used < grown {
			short = max(short, grown-used)
		}
	}
	var live atomic.Int64
	refused := make([]bool, len(tenants))
	for round := 0; ; round++ {
		progress := false
		for i, tn := range tenants {
			if refused[i] {
				continue
			}
			_, err := tn.Alloc(ctx, 1<<20)
			if err != nil {
				require.ErrorIs(t, err, ErrQuotaExceeded, "tenant %d, round %d", i, round)
				refused[i] = true
				continue
			}
			live.Add(1)
			progress = true
			check()
		}
		if !progress {
			break
		}
	}
	t.Logf("%d MiB allocated; the driver holds %d MiB (at most %d), Pool.MemoryUsed %d MiB", live.Load(), (drv.Live().Bytes-base)>>20, most>>20, p.MemoryUsed()>>20)
	require.LessOrEqual(t, most, uint64(limit), "the driver held %d MiB for the tenants under a %d MiB limit", most>>20, limit>>20)
	require.Zero(t, short, "Pool.MemoryUsed counted up to %d MiB less than the driver held", short>>20)
	require.Positive(t, live.Load())
	require.Equal(t, drv.Live().Bytes-base, p.MemoryUsed(), "nothing held for allocations in flight once they are done")
	for _, tn := range tenants {
		require.NoError(t, tn.Close())
	}
	require.Zero(t, p.MemoryUsed())
	require.Equal(t, base, drv.Live().Bytes)
}

// Issue 39, item 4: MemGetInfo's free is no more than the device limit
// leaves, and what it promises can be allocated.
func TestMemGetInfoWithinTheDeviceLimit(t *testing.T) {
	const limit = 1280 << 20
	p, _ := openSim(t, WithDeviceMemoryLimit(limit))
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithoutMemoryPool())
	require.NoError(t, err)
	ctx := context.Background()
	_, err = b.Alloc(ctx, 1024<<20)
	require.NoError(t, err)
	free, total, err := a.MemGetInfo()
	require.NoError(t, err)
	require.Equal(t, uint64(limit), total)
	left := p.MemoryLimit() - p.MemoryUsed()
	require.LessOrEqual(t, free, left, "MemGetInfo says %d MiB free with %d MiB left under the limit", free>>20, left>>20)
	require.Positive(t, free)
	kv, err := a.Alloc(ctx, free)
	require.NoError(t, err, "a KV cache sized from MemGetInfo fits")
	require.NoError(t, a.Free(kv))
}

// Issue 39, item 4: MemGetInfo is not stale after a neighbour's allocation
// through the SDK (the device's figure was cached up to 1 ms).
func TestMemGetInfoSeesANeighboursAllocation(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	ctx := context.Background()
	for _, opts := range [][]TenantOption{{WithoutMemoryPool()}, {}} {
		b, err := p.NewTenant("b", opts...)
		require.NoError(t, err)
		before, total, err := a.MemGetInfo() // the device's figure, cached
		require.NoError(t, err)
		n := total / 3 * 2
		ptr, err := b.Alloc(ctx, n)
		require.NoError(t, err)
		free, _, err := a.MemGetInfo()
		require.NoError(t, err)
		require.LessOrEqual(t, free, before-n, "free %d MiB right after the neighbour took %d of %d MiB", free>>20, n>>20, before>>20)
		require.NoError(t, b.Free(ptr))
		require.NoError(t, b.Close())
		free, _, err = a.MemGetInfo()
		require.NoError(t, err)
		require.Greater(t, free, before-n, "the neighbour's memory is back")
	}
}

// Issue 39, item 3 on the simulator as on the H200 (whose driver gives a
// freed block's chunk back only once the stream it was freed on was
// synchronised): a tenant's cached blocks give way to a neighbour at the
// device limit. (TestGPUPooledCachesUnderDeviceLimit refused b's fifth
// chunk on the H200 when the neighbours' trims synchronised nothing.)
func TestPooledCachesGiveWayAtTheDeviceLimit(t *testing.T) {
	const limit = 1 << 30
	p, drv := openSim(t, WithDeviceMemoryLimit(limit))
	a, err := p.NewTenant("a", WithMemoryPool(0), WithMemoryQuota(limit))
	require.NoError(t, err)
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	ctx := context.Background()
	var ptrs []DevicePtr
	for range 28 {
		ptr, err := a.Alloc(ctx, 32<<20)
		require.NoError(t, err)
		ptrs = append(ptrs, ptr)
	}
	for _, ptr := range ptrs {
		require.NoError(t, a.Free(ptr))
	}
	for i := range 28 {
		_, err := b.Alloc(ctx, 32<<20)
		require.NoError(t, err, "allocation %d of b", i)
		require.LessOrEqual(t, drv.Live().Bytes, uint64(limit), "after allocation %d of b", i)
	}
}

// Issue 39, item 6: a neighbour's allocation at the device limit, which
// trims every pooled tenant's cache, leaves a capture in progress on a
// tenant's first stream alone, and waits for no stream: a stream whose
// work runs keeps its freed blocks' chunks (the driver gives them back only
// after a synchronisation), one whose work is done is synchronised at once.
func TestNeighbourAtTheLimitLeavesACaptureAlone(t *testing.T) {
	const limit = 64 << 20
	p, drv := openSim(t, WithDeviceMemoryLimit(limit))
	a, err := p.NewTenant("a", WithMemoryQuota(32<<20))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithMemoryQuota(48<<20), WithoutMemoryPool())
	require.NoError(t, err)
	ctx := context.Background()
	s2, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	ptr, err := a.AllocAsync(s2, 28<<20)
	require.NoError(t, err)
	require.NoError(t, a.FreeAsync(s2, ptr)) // cached on s2's list: a's pool maps 32 of 64 MiB
	inCapture, release := make(chan struct{}), make(chan struct{})
	var g *Graph
	var capErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		g, capErr = a.Stream().Capture(ctx, func() error {
			close(inCapture)
			<-release
			return nil
		})
	})
	<-inCapture
	drv.HoldEventsIn(p.dev.Primary(), true) // every stream's work seems to run
	syncs := drv.Calls("cuStreamSynchronize") + drv.Calls("cuCtxSynchronize")
	_, busyErr := b.Alloc(ctx, 40<<20)
	syncsBusy := drv.Calls("cuStreamSynchronize") + drv.Calls("cuCtxSynchronize")
	drv.HoldEventsIn(p.dev.Primary(), false)
	q, err := b.Alloc(ctx, 40<<20)
	close(release)
	wg.Wait()
	require.ErrorIs(t, busyErr, ErrQuotaExceeded, "a's chunk waits for s2's work")
	require.Equal(t, syncs, syncsBusy, "an allocation at the limit waits for no stream")
	require.NoError(t, err, "a's cache makes room once s2's work is done")
	require.NoError(t, capErr, "the capture on a's first stream")
	require.NoError(t, g.Close())
	require.NoError(t, b.Free(q))
}

// Issue 39, item 7: Trim racing Reshape. Trim entered the tenant's life
// lock once for itself and again for each stream and the pool; a Reshape's
// pause between two entries waited for the first while the next waited at
// its gate. Both must end.
func TestTrimRacingReshapeEnds(t *testing.T) {
	p, err := openSimErr(0) // closed only if nothing hangs
	require.NoError(t, err)
	lat, err := p.NewTenant("lat", WithSMs(8), WithReshapeSizes(16))
	require.NoError(t, err)
	ctx := context.Background()
	var streams []*Stream
	for range 4 {
		s, err := lat.NewStream(ClassDefault)
		require.NoError(t, err)
		streams = append(streams, s)
	}
	rounds := 5000
	if raceEnabled {
		rounds = 1000
	}
	finished := make(chan error, 1)
	go func() {
		var wg sync.WaitGroup
		var errs [2]error
		wg.Go(func() {
			for range rounds {
				for _, s := range streams {
					ptr, err := lat.AllocAsync(s, 1<<20)
					if err != nil {
						errs[0] = err
						return
					}
					if err := lat.FreeAsync(s, ptr); err != nil { // cached: Trim flushes it
						errs[0] = err
						return
					}
				}
				if err := lat.Trim(); err != nil {
					errs[0] = err
					return
				}
			}
		})
		wg.Go(func() {
			for i := range rounds {
				if err := lat.Reshape(ctx, 8+8*((i+1)%2)); err != nil {
					errs[1] = err
					return
				}
			}
		})
		wg.Wait()
		finished <- errors.Join(errs[:]...)
	}()
	select {
	case err := <-finished:
		require.NoError(t, err)
		require.NoError(t, p.Close())
	case <-time.After(30 * time.Second): // the rounds take well under a second
		t.Fatal("Trim and Reshape wait for each other")
	}
}

// Issue 39, item 19: an Alloc racing its tenant's Close answers a typed
// error (the quota, or ErrClosed), never the driver's raw out-of-memory:
// the pool full at its maximum size is the tenant's quota whether or not a
// Close has begun.
func TestAllocRacingCloseIsTyped(t *testing.T) {
	p, _ := openSim(t)
	rounds := 40
	if raceEnabled {
		rounds = 10
	}
	for round := range rounds {
		tn, err := p.NewTenant(fmt.Sprint("storm", round), WithMemoryQuota(64<<20))
		require.NoError(t, err)
		var wg sync.WaitGroup
		var bad atomic.Pointer[error]
		var started sync.WaitGroup
		for g := range 8 {
			started.Add(1)
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), uint64(round)))
				s, err := tn.NewStream(ClassDefault)
				started.Done()
				if err != nil {
					return
				}
				var mine []DevicePtr
				for range 200 {
					if len(mine) > 0 && r.IntN(3) == 0 {
						k := r.IntN(len(mine))
						_ = tn.FreeAsync(s, mine[k])
						mine = append(mine[:k], mine[k+1:]...)
						continue
					}
					ptr, err := tn.AllocAsync(s, uint64(1+r.IntN(6<<20)))
					switch {
					case err == nil:
						mine = append(mine, ptr)
					case errors.Is(err, ErrQuotaExceeded), errors.Is(err, ErrClosed):
					default:
						bad.CompareAndSwap(nil, &err)
						return
					}
				}
			})
		}
		started.Wait()
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		require.NoError(t, tn.Close())
		wg.Wait()
		if e := bad.Load(); e != nil {
			t.Fatalf("round %d: an Alloc racing Close: %v (is the driver's out-of-memory: %v)", round, *e, errors.Is(*e, cuda.ErrorOutOfMemory))
		}
	}
}
