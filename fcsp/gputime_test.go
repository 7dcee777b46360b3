package fcsp

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// spinDuration models "spin" as 10 us per block of the grid, so shapes
// differ by up to 200x (2 ms: twice the 1 ms bucket).
func spinDuration(grid, _ cuda.Dim3) time.Duration {
	return time.Duration(grid.X) * 10 * time.Microsecond
}

type simClock struct{ ns atomic.Int64 }

func (c *simClock) now() int64              { return c.ns.Load() }
func (c *simClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// GPU time is exact per tenant and per class, and folding it in never
// waits: with the GPU "behind" (events not ready) launches go on and
// Stats reports only what completed.
func TestGPUTimeMetering(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	tn, err := p.NewTenant("metered", WithGPUMetering())
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	att, err := tn.NewStream(ClassAttention)
	require.NoError(t, err)
	var a Args
	a.Uint64(0)
	ctx := t.Context()
	for range 10 {
		require.NoError(t, tn.Stream().Launch(ctx, fn, Dim3{X: 3, Y: 1, Z: 1}, one, 0, &a)) // 30 us
		require.NoError(t, att.Launch(ctx, fn, Dim3{X: 100, Y: 1, Z: 1}, one, 0, &a))       // 1 ms
	}
	st := tn.Stats()
	require.InDelta(t, float64(300*time.Microsecond), float64(st.GPUTimeByClass[ClassDefault]), 1e3)
	require.InDelta(t, float64(10*time.Millisecond), float64(st.GPUTimeByClass[ClassAttention]), 1e3)
	require.InDelta(t, float64(10300*time.Microsecond), float64(st.GPUTime), 2e3)

	drv.HoldEvents(true)
	for range 5 {
		require.NoError(t, att.Launch(ctx, fn, Dim3{X: 100, Y: 1, Z: 1}, one, 0, &a))
	}
	require.Equal(t, st.GPUTime, tn.Stats().GPUTime, "GPU time counted before its events completed")
	drv.HoldEvents(false)
	require.InDelta(t, float64(15300*time.Microsecond), float64(tn.Stats().GPUTime), 3e3)
	// A closed stream's time stays in the tenant's account.
	require.NoError(t, att.Close())
	require.InDelta(t, float64(15300*time.Microsecond), float64(tn.Stats().GPUTime), 3e3)
}

// A tenant with a GPU share f gets f of the device's time whatever its
// kernels' shapes: kernels of 10 us, 1 ms and 2 ms (twice the bucket)
// launched as fast as admission allows, on a deterministic clock.
func TestGPUShareHoldsAcrossKernelShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kern  string
		grid  uint32
		class Class
		scale float64
	}{
		{"spin-10us", "spin", 1, ClassDefault, 1},
		{"spin-1ms", "spin", 100, ClassDefault, 1},
		{"spin-2ms", "spin", 200, ClassDefault, 1}, // twice the bucket
		{"spin-1ms-attention", "spin", 100, ClassAttention, 0.8},
		{"spin-1ms-memcpy", "spin", 100, ClassMemcpy, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const share = 0.25
			p, drv := openSim(t)
			drv.SetKernelDuration("spin", spinDuration)
			var clk simClock
			tn, err := p.NewTenant("share", WithGPUShare(share), WithStreamClass(tc.class), withClock(clk.now))
			require.NoError(t, err)
			defer tn.Close()
			mod, err := tn.LoadModule(kernels.ChainPTX)
			require.NoError(t, err)
			fn, err := mod.Function(tc.kern)
			require.NoError(t, err)
			var a Args
			if tc.kern == "spin" {
				a.Uint64(0) // spin(unsigned long long cycles)
			} else {
				a.Ptr(0).Int32(0).Int32(0) // chain(float *x, int n, int steps): n 0 touches nothing
			}
			const window = 500 * time.Millisecond
			for el := time.Duration(0); el < window; el += 10 * time.Microsecond {
				clk.advance(10 * time.Microsecond)
				for {
					err := tn.Stream().TryLaunch(fn, Dim3{X: tc.grid, Y: 1, Z: 1}, one, 0, &a)
					if err != nil {
						require.ErrorIs(t, err, ErrThrottled)
						break
					}
				}
			}
			got := float64(tn.Stats().GPUTime) / float64(window)
			want := share / tc.scale // a class charged less gets more
			require.InEpsilon(t, want, got, 0.05, "GPU-time fraction %.4f, want %.4f", got, want)
			require.Equal(t, share, tn.Stats().GPUShare)
		})
	}
}

// The launch-rate model (WithSMLimit) stays available and, as the issue
// says, does not mean a share of the device's time: the same limit gives
// kernels of different lengths very different fractions.
func TestSMLimitIsNotAGPUShare(t *testing.T) {
	frac := func(d time.Duration) float64 {
		p, drv := openSim(t)
		drv.SetKernelDuration("spin", func(_, _ cuda.Dim3) time.Duration { return d })
		var clk simClock
		tn, err := p.NewTenant("rate", WithSMLimit(0.25), WithGPUMetering(), withClock(clk.now))
		require.NoError(t, err)
		defer tn.Close()
		fn := spinKernel(t, tn)
		var a Args
		a.Uint64(0)
		const window = 200 * time.Millisecond
		for el := time.Duration(0); el < window; el += 10 * time.Microsecond {
			clk.advance(10 * time.Microsecond)
			for tn.Stream().TryLaunch(fn, quarter, big, 0, &a) == nil {
			}
		}
		return float64(tn.Stats().GPUTime) / float64(window)
	}
	short, long := frac(10*time.Microsecond), frac(time.Millisecond)
	require.Greater(t, long/short, 50.0, "launch-rate limit gave %.4f and %.4f of the GPU's time", short, long)
}

func TestGPUShareOptions(t *testing.T) {
	p, _ := openSim(t)
	_, err := p.NewTenant("x", WithGPUShare(0))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = p.NewTenant("x", WithGPUShare(1.5))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = p.NewTenant("x", WithGPUShare(0.5), WithSMLimit(0.5))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "choose one")
}

// Close races metered launches, Stats and stream closes: every call either
// works or says ErrClosed, and nothing is left behind (run with -race).
func TestGPUShareCloseRacesLaunches(t *testing.T) {
	for _, part := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "partitioned"}[part], func(t *testing.T) { closeRacesLaunches(t, part) })
	}
}

func closeRacesLaunches(t *testing.T, partitioned bool) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	opts := []TenantOption{WithGPUShare(0.5)}
	if partitioned {
		opts = append(opts, WithSMs(8))
	}
	tn, err := p.NewTenant("racy", opts...)
	require.NoError(t, err)
	fn := spinKernel(t, tn)
	done := make(chan error, 8)
	for i := range 4 {
		go func() {
			var a Args
			a.Uint64(0)
			s := tn.Stream()
			if i%2 == 1 {
				var err error
				if s, err = tn.NewStream(ClassAttention); err != nil {
					done <- nil // the tenant closed first
					return
				}
			}
			for {
				err := s.Launch(t.Context(), fn, Dim3{X: 1, Y: 1, Z: 1}, one, 0, &a)
				if err != nil {
					if errors.Is(err, ErrClosed) {
						err = nil
					}
					done <- err
					return
				}
				_ = tn.Stats()
			}
		}()
	}
	time.Sleep(2 * time.Millisecond)
	require.NoError(t, tn.Close())
	for range 4 {
		require.NoError(t, <-done)
	}
	require.Zero(t, drv.Live().Events, "events left after Close")
}
