package fcsp

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A metered launch polls its stream's meter from inside the life lock it
// already holds. On a partition it entered the life lock a second time to
// do so (the shared device polled directly): a Reshape that had raised its
// gate between the two waited for the launch, and the launch's second
// entry waited at the gate for the Reshape.
func TestReshapeRacingMeteredLaunch(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16), WithGPUMetering())
	require.NoError(t, err)
	raceLaunchesWithReshapes(t, a)
	require.NoError(t, a.Close())
}

// The same shape on a driver that refuses launches and waits with no
// context current: the launch, in the life lock, fell back to the tenant's
// context through a second entry, which a Reshape's gate could stop while
// the Reshape waited for the launch.
func TestReshapeRacingLaunchOnAContextDriver(t *testing.T) {
	p, drv := openSim(t)
	drv.RequireContext()
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16))
	require.NoError(t, err)
	raceLaunchesWithReshapes(t, a)
	require.Equal(t, probeNo, p.unscoped.launch.State(), "the driver took a launch with no context")
	require.NoError(t, a.Close())
}

// raceLaunchesWithReshapes launches on a's first stream from two
// goroutines (a wait every 64) while a reshapes between 8 and 16 SMs, at
// least 20,000 launches and a second; each Reshape must finish within 2 s.
func raceLaunchesWithReshapes(t *testing.T, a *Tenant) {
	fn := spinKernel(t, a)
	ctx := context.Background()
	stop := make(chan struct{})
	var launches atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			var args Args
			args.Uint64(0)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := a.Stream().Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args); err != nil {
					t.Error(err)
					return
				}
				launches.Add(1)
				if i%64 == 0 {
					if err := a.Stream().Synchronize(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	start := time.Now()
	for i := 0; launches.Load() < 20000 || time.Since(start) < time.Second; i++ {
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := a.Reshape(short, []int{16, 8}[i%2])
		cancel()
		if err != nil {
			close(stop)
			wg.Wait()
			require.NoError(t, err, "reshape %d", i)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d launches", launches.Load())
}
