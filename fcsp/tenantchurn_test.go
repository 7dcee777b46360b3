package fcsp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A tenant made and closed per job makes no stream or memory pool in the
// driver once the pool has kept an earlier tenant's: both are reused,
// emptied; Pool.Close destroys what it kept. Memory figures stay exact.
func TestTenantChurnReusesStreamsAndPools(t *testing.T) {
	p, drv := openSim(t)
	ctx := context.Background()
	job := func() {
		tn, err := p.NewTenant("job", WithMemoryQuota(64<<20))
		require.NoError(t, err)
		ptr, err := tn.Alloc(ctx, 1<<20)
		require.NoError(t, err)
		require.Equal(t, uint64(1<<20), tn.Stats().MemoryUsed)
		require.NoError(t, tn.Free(ptr))
		require.NoError(t, tn.Close())
	}
	job()
	streams, pools := drv.Calls("cuStreamCreate"), drv.Calls("cuMemPoolCreate")
	for range 20 {
		job()
	}
	require.Equal(t, streams, drv.Calls("cuStreamCreate"), "a job's stream came from the driver")
	require.Equal(t, pools, drv.Calls("cuMemPoolCreate"), "a job's memory pool came from the driver")
	require.Zero(t, p.Stats().MemoryUsed)

	// Another size is a pool of its own; more than the pool keeps are destroyed.
	other, err := p.NewTenant("other", WithMemoryQuota(32<<20))
	require.NoError(t, err)
	require.Equal(t, pools+1, drv.Calls("cuMemPoolCreate"))
	require.NoError(t, other.Close())

	require.NoError(t, p.Close())
	require.Equal(t, drv.Calls("cuMemPoolCreate"), drv.Calls("cuMemPoolDestroy"), "pools left behind")
	require.Zero(t, drv.Live().Streams)
}
