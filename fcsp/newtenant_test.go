package fcsp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/lockorder"
)

// newTenantKinds are tenants of every kind NewTenant builds, each with
// its driver work: the commons' stream, a prewarmed spare taken, green
// contexts built, a reshapable partition's layouts, a pool of its own, a
// metered stream's events, the rest of the SMs (closing the spares first).
var newTenantKinds = [][]TenantOption{
	{},
	{WithSMs(16)},
	{WithSMs(8), WithMemoryPool(0)},
	{WithSMs(8), WithReshapeSizes(16)},
	{WithGPUMetering(), WithoutMemoryPool()},
	{WithRestOfSMs()},
}

// NewTenant holds the pool's lock for its bookkeeping alone: every driver
// call it makes is made outside it, so that the fault path, which only
// tries that lock, names the tenants while one is being made, and Stats
// or Tenants never wait for the driver. (Before, newTenant held Pool.mu
// across all of them: building green contexts, streams, a memory pool; the
// lock order check reported each call.)
func TestNewTenantCallsNoDriverUnderThePoolLock(t *testing.T) {
	skipUnchecked(t)
	p, _ := openSim(t, WithPrewarm(16))
	before := lockorder.Violations()
	for i, opts := range newTenantKinds {
		tn, err := p.NewTenant(fmt.Sprint("t", i), opts...)
		require.NoError(t, err, "kind %d", i)
		require.NoError(t, tn.Stream().Synchronize())
	}
	require.Zero(t, lockorder.Violations()-before, "a driver call under the pool's lock, tenancy Roster.mu (the report is on stderr)")
}

// NewTenant racing the pool's Close or Shutdown, and each other: each
// either hands out a tenant, which the Close closes, or says ErrClosed (or
// ErrInsufficientSMs, where the rest of the SMs went first), having given
// back what it built outside the pool's lock; nothing of the driver's is
// left once the pool is closed.
func TestNewTenantRacingPoolClose(t *testing.T) {
	for round := range 24 {
		p, err := openSimErr(0, WithPrewarm(16, 8))
		require.NoError(t, err)
		drv := simFake(p)
		var wg sync.WaitGroup
		errs := make([]error, len(newTenantKinds))
		for i, opts := range newTenantKinds {
			wg.Go(func() {
				tn, err := p.NewTenant(fmt.Sprint("t", i), opts...)
				if err == nil {
					_, err = tn.Alloc(context.Background(), 1<<20) // ErrClosed where the Close was first
				}
				if !errors.Is(err, ErrClosed) && !errors.Is(err, ErrInsufficientSMs) { // the rest may come first
					errs[i] = err
				}
			})
		}
		var closeErr error
		wg.Go(func() {
			if round%2 == 0 {
				closeErr = p.Close()
			} else {
				closeErr = p.Shutdown(context.Background())
			}
		})
		wg.Wait()
		require.NoError(t, errors.Join(append(errs, closeErr)...), "round %d", round)
		require.NoError(t, p.Close())
		require.Empty(t, p.Tenants())
		live := drv.Live()
		require.Zero(t, live.GreenCtxs, "round %d: %+v", round, live)
		require.Zero(t, live.Streams, "round %d: %+v", round, live)
		require.Zero(t, live.Events, "round %d: %+v", round, live)
		require.Zero(t, live.Bytes, "round %d: %+v", round, live)
		_, err = p.NewTenant("late")
		require.ErrorIs(t, err, ErrClosed)
	}
}
