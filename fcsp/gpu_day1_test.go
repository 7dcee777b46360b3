package fcsp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGPUWaitsAreBounded: a kernel spinning about a second cannot hold
// SynchronizeContext or Shutdown past their deadlines, and the work and the
// close still finish.
func TestGPUWaitsAreBounded(t *testing.T) {
	p := openGPU(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	spin := spinKernel(t, a)
	one := Dim3{X: 1, Y: 1, Z: 1}
	launch := func() {
		var args Args
		require.NoError(t, a.Stream().Launch(context.Background(), spin, one, one, 0, args.Uint64(2_000_000_000)))
	}

	launch()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	start := time.Now()
	require.ErrorIs(t, a.Stream().SynchronizeContext(ctx), context.DeadlineExceeded)
	cancel()
	require.Less(t, time.Since(start), 300*time.Millisecond, "gave up at the deadline")
	require.NoError(t, a.Stream().Synchronize())
	t.Logf("spin kernel took %v", time.Since(start))

	launch()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	require.ErrorIs(t, a.Shutdown(ctx), context.DeadlineExceeded)
	require.Less(t, time.Since(start), 300*time.Millisecond)
	require.Eventually(t, func() bool { return len(p.Tenants()) == 0 }, 10*time.Second, 5*time.Millisecond, "the close finished in the background")
}
