package fcsp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/unscoped"
)

// The probes' states (unscopedProbe), as the tests read them.
const (
	probeYes = unscoped.Yes
	probeNo  = unscoped.No
)

func launchOnce(t *testing.T, tn *Tenant) {
	t.Helper()
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	one := Dim3{X: 1, Y: 1, Z: 1}
	require.NoError(t, tn.Stream().Launch(context.Background(), fn, one, one, 0, &a))
	require.NoError(t, tn.Stream().Synchronize())
	ev, err := tn.NewEvent()
	require.NoError(t, err)
	require.NoError(t, ev.Record(tn.Stream()))
	require.NoError(t, ev.Synchronize())
	require.NoError(t, ev.Close())
}

func TestUnscopedCallsWhereTheDriverTakesThem(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	launchOnce(t, tn)
	require.Equal(t, probeYes, p.unscoped.launch.State())
	require.Equal(t, probeYes, p.unscoped.sync.State())
	pooled, err := p.NewTenant("pooled", WithSMs(8), WithMemoryPool(0))
	require.NoError(t, err)
	ptr, err := pooled.Alloc(context.Background(), 4096)
	require.NoError(t, err)
	require.NoError(t, pooled.Free(ptr))
	require.Equal(t, probeYes, p.unscoped.pool.State())
}

func TestScopedFallbackWhereTheDriverRefuses(t *testing.T) {
	p, drv := openSim(t)
	drv.RequireContext()
	tn, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	launchOnce(t, tn)
	require.Equal(t, probeNo, p.unscoped.launch.State(), "a refused unscoped launch falls back to the scoped one")
	require.Equal(t, probeNo, p.unscoped.sync.State())
	launchOnce(t, tn) // and stays there
	require.Equal(t, uint64(2), tn.Stats().Launches)
	pooled, err := p.NewTenant("pooled", WithSMs(8), WithMemoryPool(0))
	require.NoError(t, err)
	ptr, err := pooled.Alloc(context.Background(), 4096)
	require.NoError(t, err)
	require.NoError(t, pooled.Free(ptr))
	require.Equal(t, probeNo, p.unscoped.pool.State())
}
