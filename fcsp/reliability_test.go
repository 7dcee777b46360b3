package fcsp

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 20, item 3: a process reaped from the shared region learns it:
// allocations fail with ErrReaped, frees still free the device memory, and
// the node-wide total never wraps.
func TestReapedProcessIsRefused(t *testing.T) {
	p, drv := openSim(t, WithSharedRegion(filepath.Join(t.TempDir(), "region")))
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	ptr, err := a.Alloc(context.Background(), 32<<20)
	require.NoError(t, err)
	require.True(t, p.shared.Slot().Leave(), "what a reaper does to a stalled process")
	_, err = a.Alloc(context.Background(), 1<<20)
	require.ErrorIs(t, err, ErrReaped)
	require.NoError(t, a.Free(ptr))
	require.NoError(t, a.Trim()) // the pool gives what it keeps back to the driver
	require.Zero(t, drv.Live().Bytes)
	require.Zero(t, p.MemoryUsed(), "the node-wide total wrapped")
}

// Issue 20, item 7: Alloc on a scope that ended (or is ending) answers
// ErrClosed, never panics, and leaves nothing allocated.
func TestScopeAllocAfterItEnds(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	for range 50 {
		var kept *Scope
		var wg sync.WaitGroup
		start := make(chan struct{})
		err := a.Scope(context.Background(), func(s *Scope) error {
			kept = s
			for range 4 {
				wg.Go(func() {
					<-start
					for range 20 {
						if ptr, err := s.Alloc(4096); err == nil {
							_ = s.Free(ptr)
						} else if !errors.Is(err, ErrClosed) {
							t.Error(err)
						}
					}
				})
			}
			close(start)
			return nil
		})
		require.NoError(t, err)
		wg.Wait()
		_, err = kept.Alloc(4096)
		require.ErrorIs(t, err, ErrClosed)
		require.NoError(t, a.Trim()) // what the pool keeps goes back to the driver
		require.Zero(t, drv.Live().Bytes)
	}
}

// Issue 20, item 8: Trim racing Close answers ErrClosed, never a driver
// error about the destroyed pool.
func TestTrimRacingClose(t *testing.T) {
	p, _ := openSim(t)
	for round := range 100 {
		a, err := p.NewTenant("a", WithMemoryPool(0), WithMemoryQuota(1<<30))
		require.NoError(t, err)
		ptr, err := a.Alloc(context.Background(), 1<<20)
		require.NoError(t, err)
		require.NoError(t, a.Free(ptr))
		var wg sync.WaitGroup
		var started sync.WaitGroup
		for range 4 {
			started.Add(1)
			wg.Go(func() {
				started.Done()
				for { // until the Close lands
					err := a.Trim()
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("round %d: Trim racing Close: %v", round, err)
						return
					}
				}
			})
		}
		started.Wait()
		require.NoError(t, a.Close())
		wg.Wait()
	}
}

// Issue 20, item 9: streams and events made while their tenant or pool
// closes are destroyed by that Close; an event whose tenant closed can
// still be closed (a no-op).
func TestStreamsAndEventsRacingClose(t *testing.T) {
	for round := range 30 {
		p, drv := openSim(t)
		a, err := p.NewTenant("a", WithSMs(16))
		require.NoError(t, err)
		b, err := p.NewTenant("b")
		require.NoError(t, err)
		early, err := a.NewEvent()
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, tn := range []*Tenant{a, b} {
			wg.Go(func() {
				<-start
				for range 20 {
					if _, err := tn.NewStream(ClassDefault); err != nil && !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					if _, err := tn.NewEvent(); err != nil && !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					if _, err := p.NewEvent(); err != nil && !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
				}
			})
		}
		close(start)
		require.NoError(t, a.Close())
		require.NoError(t, p.Close())
		wg.Wait()
		require.NoError(t, early.Close(), "closing an event whose tenant closed")
		require.ErrorIs(t, early.Record(nil), ErrClosed)
		l := drv.Live()
		require.Zero(t, l.Streams, "round %d: streams left in the driver", round)
		require.Zero(t, l.Events, "round %d: events left in the driver", round)
	}
}

// Issue 20, item 10 and the WithContext(nil) note: bad input gets a typed
// error, never a CUDA code or a panic.
func TestUntypedErrorsAreTyped(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	_, err = a.Alloc(context.Background(), 1<<49)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, a.Stream().Launch(context.Background(), nil, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 1, Y: 1, Z: 1}, 0, nil), ErrInvalidArgument)
	_, err = p.NewTenant("b", WithContext(nil)) //nolint:staticcheck // the point of the test
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = openSimErr(0, WithPartitionUnit(133))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, p.Close())
	_, err = p.NewEvent()
	require.ErrorIs(t, err, ErrClosed)
}

// Issue 20, item 11: an unbounded quota with a memory pool no longer makes
// every Alloc fail with a misleading ErrQuotaExceeded: it is refused at
// NewTenant with a typed error naming the limit (issue 16), and a quota of
// exactly the device limit with a pool allocates (the pool's maximum size
// is clamped to the device).
func TestUnboundedQuotaWithPool(t *testing.T) {
	p, _ := openSim(t)
	_, err := p.NewTenant("a", WithMemoryQuota(math.MaxUint64), WithMemoryPool(0))
	require.ErrorIs(t, err, ErrInvalidArgument)
	a, err := p.NewTenant("a", WithMemoryQuota(p.MemoryLimit()), WithMemoryPool(0))
	require.NoError(t, err)
	ptr, err := a.Alloc(context.Background(), 1<<20)
	require.NoError(t, err)
	require.NoError(t, a.Free(ptr))
}

// Issue 20, item 5: blocks a pooled tenant keeps after Free count against
// the device limit, and a tenant that reaches the limit has them trimmed:
// the driver never holds more than the limit (it held 1984 MiB against
// 1024 before).
func TestPooledCachesCountAgainstTheDeviceLimit(t *testing.T) {
	const limit = 1 << 30
	p, drv := openSim(t, WithDeviceMemoryLimit(limit))
	a, err := p.NewTenant("a", WithMemoryPool(0), WithMemoryQuota(limit))
	require.NoError(t, err)
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	var ptrs []DevicePtr
	for range 31 {
		ptr, err := a.Alloc(context.Background(), 32<<20)
		require.NoError(t, err)
		ptrs = append(ptrs, ptr)
	}
	for _, ptr := range ptrs {
		require.NoError(t, a.Free(ptr))
	}
	require.NotZero(t, a.Stats().MemoryCached, "the test needs cached blocks")
	for i := range 31 {
		_, err := b.Alloc(context.Background(), 32<<20)
		require.NoError(t, err, "allocation %d of b", i)
		require.LessOrEqual(t, drv.Live().Bytes, uint64(limit), "after allocation %d of b the driver holds more than the device limit", i)
	}
	_, err = b.Alloc(context.Background(), 64<<20)
	require.ErrorIs(t, err, ErrQuotaExceeded)
}

// Issue 20, item 9 (the calls): Record, Synchronize and Since on a tenant's
// events racing the tenant's Close answer ErrClosed or succeed; none reaches
// the driver with a destroyed event.
func TestEventCallsRacingClose(t *testing.T) {
	p, drv := openSim(t)
	for round := range 50 {
		a, err := p.NewTenant("a", WithSMs(8))
		require.NoError(t, err)
		var wg sync.WaitGroup
		var started sync.WaitGroup
		for range 2 {
			start, err := a.NewEvent()
			require.NoError(t, err)
			end, err := a.NewEvent()
			require.NoError(t, err)
			started.Add(1)
			wg.Go(func() {
				started.Done()
				for {
					err := start.Record(a.Stream())
					if err == nil {
						err = end.Record(a.Stream())
					}
					if err == nil {
						err = end.Synchronize()
					}
					if err == nil {
						_, err = end.Since(start)
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("round %d: an event call racing Close: %v", round, err)
						return
					}
				}
			})
		}
		started.Wait()
		require.NoError(t, a.Close())
		wg.Wait()
		require.Zero(t, drv.Live().Events)
	}
}
