package fcsp

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 20, items 1 and 2: a tenant made WithContext whose context is
// cancelled is being closed by the context's goroutine; a Tenant.Close or
// Pool.Close that starts meanwhile must wait for that close, so that when it
// returns nothing is counted, nothing is held by the driver, and (item 1) the
// shared region is not unmapped under the close still writing to it.
func TestCloseWaitsForTheCloseInProgress(t *testing.T) {
	dir := t.TempDir()
	for round := range 60 {
		region := filepath.Join(dir, "region")
		p, drv := openSim(t, WithSharedRegion(region))
		var tenants []*Tenant
		var cancels []context.CancelFunc
		for i := range 4 {
			ctx, cancel := context.WithCancel(context.Background())
			opts := []TenantOption{WithContext(ctx)}
			if i%2 == 1 {
				opts = append(opts, WithMemoryPool(0))
			}
			tn, err := p.NewTenant(string(rune('a'+i)), opts...)
			require.NoError(t, err)
			for range 16 {
				_, err := tn.Alloc(context.Background(), 2<<20)
				require.NoError(t, err)
			}
			tenants, cancels = append(tenants, tn), append(cancels, cancel)
		}
		for _, c := range cancels {
			c()
		}
		if round%2 == 0 {
			// Item 2: Tenant.Close returns only once the tenant is closed.
			require.NoError(t, tenants[0].Close())
			require.Zero(t, tenants[0].c.acct.Used(), "round %d: memory still counted after Tenant.Close returned", round)
		}
		require.NoError(t, p.Close())
		require.Zero(t, drv.Live().Bytes, "round %d: the driver still holds memory after Pool.Close returned", round)
		require.Zero(t, p.MemoryUsed(), "round %d", round)
		// The next pool on the same region starts at zero.
		q, _ := openSim(t, WithSharedRegion(region))
		require.Zero(t, q.MemoryUsed(), "round %d: a late write landed in the next mapping", round)
		require.NoError(t, q.Close())
	}
}

// Issue 20, item 6: MemoryUsed (which reads the shared region) and Stats
// during and after Close (a metrics scrape) answer, never panic.
func TestUsageDuringAndAfterClose(t *testing.T) {
	for range 20 {
		p, _ := openSim(t, WithSharedRegion(filepath.Join(t.TempDir(), "region")))
		tn, err := p.NewTenant("a")
		require.NoError(t, err)
		_, err = tn.Alloc(context.Background(), 1<<20)
		require.NoError(t, err)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					_ = p.MemoryUsed()
					_ = p.Stats()
				}
			})
		}
		require.NoError(t, p.Close())
		close(stop)
		wg.Wait()
		require.Zero(t, p.MemoryUsed())
		require.Zero(t, p.Stats().MemoryUsed)
	}
}
