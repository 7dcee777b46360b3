package fcsp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A share of the whole device is no limit: at share 1 a tenant never waits
// and is never refused, whatever its kernels' length (here 2 ms, twice the
// 1 ms bucket), on a clock that never moves. SetSMLimit below 1 limits it
// again, and back to 1 lifts the limit.
func TestGPUShareOneNeverWaits(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	var clk simClock // frozen: no token ever refills
	tn, err := p.NewTenant("full", WithGPUShare(1), withClock(clk.now))
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	long := Dim3{X: 200, Y: 1, Z: 1} // 2 ms
	s := tn.Stream()
	// The frozen clock never refills, so a launch that waits would wait
	// until this deadline and fail.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for i := range 100 {
		require.NoError(t, s.TryLaunch(fn, long, one, 0, &a), "TryLaunch %d at share 1", i)
		require.NoError(t, s.Launch(ctx, fn, long, one, 0, &a), "Launch %d at share 1", i)
		r, err := s.Reserve(fn, long, one)
		require.NoError(t, err)
		require.Zero(t, r.Delay(), "reservation %d at share 1 must not wait", i)
		require.NoError(t, r.Launch(ctx, 0, &a))
	}
	st := tn.Stats()
	require.Zero(t, st.Throttled, "share 1 waited")
	require.Equal(t, uint64(300), st.Launches)
	require.InDelta(t, float64(600*time.Millisecond), float64(st.GPUTime), 1e6, "share 1 still meters")

	// Limited, the frozen clock runs out at once.
	require.NoError(t, tn.SetSMLimit(0.25))
	for s.TryLaunch(fn, long, one, 0, &a) == nil {
	}
	require.ErrorIs(t, s.TryLaunch(fn, long, one, 0, &a), ErrThrottled)
	// Back to 1: no limit again, whatever debt the limited launches left.
	require.NoError(t, tn.SetSMLimit(1))
	for i := range 10 {
		require.NoError(t, s.TryLaunch(fn, long, one, 0, &a), "TryLaunch %d after SetSMLimit(1)", i)
	}
}
