package fcsp

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 28 #1: a scrape (Pool.Stats, Tenant.Stats, MemoryUsed) racing
// Pool.Close on a pool with a shared region read the region as it was
// unmapped (SIGSEGV in the region's DeviceUsed), and Stats after Close
// panicked with an index out of range. A scrape during shutdown must never
// crash; after Close it shows the closed state.
func TestStatsRacingPoolClose(t *testing.T) {
	for range 20 {
		p, err := openSimErr(0, WithSharedRegion(filepath.Join(t.TempDir(), "region")))
		require.NoError(t, err)
		a, err := p.NewTenant("a", WithSMs(8))
		require.NoError(t, err)
		_, err = a.Alloc(context.Background(), 1<<20)
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				<-start
				for range 200 {
					s := p.Stats()
					_ = s.MemoryUsed
					_ = p.MemoryUsed()
					_ = a.Stats()
				}
			})
		}
		close(start)
		require.NoError(t, p.Close())
		wg.Wait()
		s := p.Stats()
		require.True(t, s.Closed)
		require.Empty(t, s.Tenants, "a closed pool lists no tenants")
		require.Zero(t, p.MemoryUsed())
		st := a.Stats()
		require.Equal(t, "a", st.Name)
		require.True(t, st.Closed)
	}
}

// Issue 28 #15: NewTenant with WithContext of a ctx that has already ended
// raced: the close context.AfterFunc started read a field NewTenant was
// still writing. The tenant is made and closed at once, nothing leaks.
func TestNewTenantWithAnEndedContext(t *testing.T) {
	p, drv := openSim(t)
	for i := range 50 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		tn, err := p.NewTenant(fmt.Sprint("t", i), WithSMs(8), WithContext(ctx))
		require.NoError(t, err)
		tn.c.waitClosed()
		_, err = tn.Alloc(context.Background(), 4096)
		require.ErrorIs(t, err, ErrClosed)
	}
	require.Empty(t, p.Tenants())
	require.Zero(t, drv.Live().Streams)
}
