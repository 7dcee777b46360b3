package fcsp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// Give-backs after a lowered share (issue 28 #8): work admitted at share
// 0.5 is corrected once its events complete, after the share went down to
// 0.125. What it gives back must be scaled as the change scaled the tokens
// in hand, or a tenant that lowered its share while work was in flight
// would find its bucket fuller than the new share ever allows: a full
// bucket at 0.5 becomes a quarter of one at 0.125, and that is the most
// it may hold after the change (the clock is frozen: nothing refills).

const (
	settleFrom, settleTo = 0.5, 0.125
	probeNs              = 10 * time.Microsecond // the probe shape's run time
)

// settleTenant is a tenant at share settleFrom on a frozen clock, with
// "spin" at 10 us per block, the probe shape (one block) measured and the
// bucket full again.
func settleTenant(t *testing.T) (*Tenant, *fake.Driver, *simClock, *Function) {
	t.Helper()
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	clk := new(simClock)
	tn, err := p.NewTenant("settle", WithGPUShare(settleFrom), withClock(clk.now), WithTenantRefillPeriod(time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = tn.Close() })
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	require.NoError(t, tn.Stream().TryLaunch(fn, us(10), one, 0, &a))
	tn.Stats() // fold it in: the probe's estimate is its run time
	clk.advance(10 * time.Millisecond)
	return tn, drv, clk, fn
}

// inHand is the tokens the tenant's buckets hold now, in ns of GPU time,
// to within one probe: how many probes they admit on the frozen clock.
func inHand(t *testing.T, tn *Tenant, fn *Function) time.Duration {
	t.Helper()
	var a Args
	a.Uint64(0)
	var n time.Duration
	for tn.Stream().TryLaunch(fn, us(10), one, 0, &a) == nil {
		n++
		require.Less(t, n, time.Duration(1000), "the bucket never ran out")
	}
	return n * probeNs
}

// mostAfter is the most a bucket may hold after the change: a full one
// scaled by it.
func mostAfter(tn *Tenant) time.Duration {
	return time.Duration(tn.c.adm.Capacity() * settleTo / settleFrom)
}

// Launches in flight across the change, measured cheaper than charged:
// two launches of an unmeasured shape, each charged a whole refill period
// (1 ms), that run 30 us.
func TestGPUShareLoweredLaunchGiveBackIsScaled(t *testing.T) {
	tn, drv, clk, fn := settleTenant(t)
	var a Args
	a.Uint64(0)
	s := tn.Stream()
	drv.HoldEvents(true)
	require.NoError(t, s.TryLaunch(fn, us(30), one, 0, &a))
	clk.advance(10 * time.Millisecond) // full again: the second is charged 1 ms too
	require.NoError(t, s.TryLaunch(fn, us(30), one, 0, &a))
	require.NoError(t, tn.SetSMLimit(settleTo))
	drv.HoldEvents(false)
	tn.Stats() // the two are measured: 2 x 970 us given back
	got := inHand(t, tn, fn)
	require.LessOrEqual(t, got, mostAfter(tn), "share %v -> %v with launches in flight: the bucket holds %v after their correction", settleFrom, settleTo, got)
	require.Positive(t, got, "nothing given back")
}

// A launch that failed after its admission ("nothing ran") gives back its
// whole charge; the share went down between the two (the kernel lowers it
// as it runs, and the end event's record fails).
func TestGPUShareLoweredNothingRanGiveBackIsScaled(t *testing.T) {
	tn, drv, _, fn := settleTenant(t)
	drv.RegisterKernel("spin", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error {
		return tn.SetSMLimit(settleTo)
	})
	drv.FailNext("cuEventRecord", cuda.Success)           // the start event
	drv.FailNext("cuEventRecord", cuda.ErrorInvalidValue) // the end event
	var a Args
	a.Uint64(0)
	require.Error(t, tn.Stream().TryLaunch(fn, us(30), one, 0, &a))
	require.Equal(t, settleTo, tn.Stats().GPUShare, "the kernel did not run")
	drv.RegisterKernel("spin", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error { return nil })
	got := inHand(t, tn, fn)
	require.LessOrEqual(t, got, mostAfter(tn), "share %v -> %v: the bucket holds %v after a failed launch's give-back", settleFrom, settleTo, got)
	require.Positive(t, got, "nothing given back")
}

// A Do in flight across the change: charged a whole refill period (its
// first call), its 30 us of library work measured after the change, or,
// with nothing queued, its whole charge given back when f returns, f
// having lowered the share.
func TestGPUShareLoweredDoGiveBackIsScaled(t *testing.T) {
	for _, tc := range []string{"measured after", "lowered inside"} {
		t.Run(tc, func(t *testing.T) {
			tn, drv, _, fn := settleTenant(t)
			ctx := t.Context()
			if tc == "measured after" {
				drv.HoldEvents(true)
				require.NoError(t, tn.TryDo(ctx, func(cur Current) error { return libLaunch(cur, nil, fn, us(30)) }))
				require.NoError(t, tn.SetSMLimit(settleTo))
				drv.HoldEvents(false)
				tn.Stats() // the Do's bracket is measured
			} else {
				require.NoError(t, tn.TryDo(ctx, func(Current) error { return tn.SetSMLimit(settleTo) }))
			}
			got := inHand(t, tn, fn)
			require.LessOrEqual(t, got, mostAfter(tn), "share %v -> %v with a Do in flight: the bucket holds %v after its correction", settleFrom, settleTo, got)
			require.Positive(t, got, "nothing given back")
		})
	}
}

// A graph, and a launch reserved ahead (Stream.Reserve), in flight across
// the change: charged a whole refill period (unmeasured), run 30 us.
func TestGPUShareLoweredGraphAndReservationGiveBackIsScaled(t *testing.T) {
	for _, tc := range []string{"graph", "reservation"} {
		t.Run(tc, func(t *testing.T) {
			tn, drv, _, fn := settleTenant(t)
			ctx := t.Context()
			s := tn.Stream()
			var launch func() error
			if tc == "graph" {
				e := spinGraph(t, tn, 30)
				launch = func() error { return s.LaunchGraph(ctx, e) }
			} else {
				r, err := s.Reserve(fn, us(30), one)
				require.NoError(t, err)
				require.Zero(t, r.Delay(), "the bucket was full")
				var a Args
				a.Uint64(0)
				launch = func() error { return r.Launch(ctx, 0, &a) }
			}
			drv.HoldEvents(true)
			require.NoError(t, launch())
			require.NoError(t, tn.SetSMLimit(settleTo))
			drv.HoldEvents(false)
			tn.Stats() // measured: 970 us given back
			got := inHand(t, tn, fn)
			require.LessOrEqual(t, got, mostAfter(tn), "share %v -> %v with a %s in flight: the bucket holds %v after its correction", settleFrom, settleTo, tc, got)
			require.Positive(t, got, "nothing given back")
		})
	}
}
