package fcsp

import (
	"context"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/stretchr/testify/require"
)

// A polling wait (WithHostWait(spin)): Synchronize returns only once the stream's work is done,
// SynchronizeContext returns ctx's error once ctx ends, and neither leaves
// the tenant's life lock held (Close does not wait for them).
func TestYieldWaitWaitsForTheWork(t *testing.T) {
	for _, part := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "partitioned"}[part], func(t *testing.T) {
			p, drv := openSim(t, WithHostWait(20*time.Microsecond))
			var opts []TenantOption
			if part {
				opts = append(opts, WithSMs(16))
			}
			tn, err := p.NewTenant("t", opts...)
			require.NoError(t, err)
			s := tn.Stream()
			drv.HoldEvents(true) // the stream's work seems to run on
			done := make(chan error, 1)
			go func() { done <- s.Synchronize() }()
			requireNoneWithin(t, done, 20*time.Millisecond, "Synchronize returned while the stream's work was still running")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			require.ErrorIs(t, s.SynchronizeContext(ctx), context.DeadlineExceeded)
			drv.HoldEvents(false)
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("Synchronize still waiting after the work finished")
			}
			require.NoError(t, tn.Close())
		})
	}
}

// SpinInDriver (the default) is the driver's cuStreamSynchronize, which the
// fake answers at once; a bad spin is refused.
func TestHostWaitOption(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithHostWait(SpinInDriver)}} {
		p, drv := openSim(t, opts...)
		tn, err := p.NewTenant("t")
		require.NoError(t, err)
		drv.HoldEvents(true) // held only for queries: the driver's wait does not ask
		require.NoError(t, tn.Stream().Synchronize())
		drv.HoldEvents(false)
	}
	_, err := openSimErr(0, WithHostWait(-2*time.Microsecond))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "SpinInDriver")
}

// A fault met while polling ends the wait with the fault, and the pool
// turns lost, as with cuStreamSynchronize.
func TestYieldWaitSeesAFault(t *testing.T) {
	p, drv := openSim(t, WithHostWait(0))
	tn, err := p.NewTenant("t", WithSMs(16))
	require.NoError(t, err)
	drv.InjectFault(0, cuda.ErrorIllegalAddress)
	err = tn.Stream().Synchronize()
	require.ErrorIs(t, err, ErrDeviceLost)
	require.True(t, p.Health().RestartRequired)
}

// MemGetInfo reads the device at most once per devmem.InfoMaxAge however many
// goroutines ask, yet a closed tenant or a lost device is said at once.
func TestMemGetInfoIsCheapAndStillTruthful(t *testing.T) {
	p, drv := openSim(t)
	tn, err := p.NewTenant("t", WithSMs(16), WithMemoryQuota(1<<30))
	require.NoError(t, err)
	before := drv.Calls("cuMemGetInfo")
	start := time.Now()
	for range 1000 {
		free, total, err := tn.MemGetInfo()
		require.NoError(t, err)
		require.Equal(t, uint64(1<<30), total)
		require.LessOrEqual(t, free, total)
	}
	calls := drv.Calls("cuMemGetInfo") - before
	require.LessOrEqual(t, calls, int(time.Since(start)/devmem.InfoMaxAge)+1, "cuMemGetInfo more than once a millisecond")
	// The tenant's own part is exact at every call.
	ptr, err := tn.Alloc(context.Background(), 256<<20)
	require.NoError(t, err)
	free, _, err := tn.MemGetInfo()
	require.NoError(t, err)
	require.LessOrEqual(t, free, uint64(768<<20))
	require.NoError(t, tn.Free(ptr))
	drv.InjectFault(0, cuda.ErrorIllegalAddress)
	_ = tn.Stream().Synchronize() // meets the fault
	_, _, err = tn.MemGetInfo()
	require.ErrorIs(t, err, ErrDeviceLost)
	other, err := p.NewTenant("u")
	if err == nil {
		require.NoError(t, other.Close())
		_, _, err = other.MemGetInfo()
		require.ErrorIs(t, err, ErrClosed)
	}
}
