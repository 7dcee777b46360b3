package fcsp

import (
	"errors"
	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/config"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// priorityPair is a pool with a LatencyCritical tenant of 16 SMs and a
// floored neighbour on the rest, the neighbour's limiter on clk.
type priorityPair struct {
	p        *Pool
	drv      *fake.Driver
	lat, nb  *Tenant
	latFn    *Function
	nbFn     *Function
	clk      *simClock
	latHeld  bool
	nbWindow time.Duration
}

func newPriorityPair(t *testing.T, nbOpts ...TenantOption) *priorityPair {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	pp := &priorityPair{p: p, drv: drv, clk: new(simClock)}
	var err error
	pp.lat, err = p.NewTenant("latency", WithSMs(16), WithPriority(LatencyCritical))
	require.NoError(t, err)
	t.Cleanup(func() { _ = pp.lat.Close() })
	pp.nb, err = p.NewTenant("batch", append([]TenantOption{WithRestOfSMs(), withClock(pp.clk.now)}, nbOpts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pp.nb.Close() })
	pp.latFn, pp.nbFn = spinKernel(t, pp.lat), spinKernel(t, pp.nb)
	return pp
}

// busy launches one kernel on the latency tenant that stays "on the GPU"
// (its events not complete) until release.
func (pp *priorityPair) busy(t *testing.T) {
	pp.drv.HoldEventsIn(cuda.Context(pp.lat.Context()), true)
	var a Args
	a.Uint64(0)
	require.NoError(t, pp.lat.Stream().Launch(t.Context(), pp.latFn, Dim3{X: 50, Y: 1, Z: 1}, one, 0, &a))
	require.True(t, pp.p.Stats().LatencyBusy)
}

func (pp *priorityPair) release() { pp.drv.HoldEventsIn(cuda.Context(pp.lat.Context()), false) }

// share is the neighbour's GPU-time fraction over window on its clock,
// launching 100 us kernels as fast as TryLaunch admits them (at most
// burst per 10 us step: a share-1 neighbour is free while nobody is busy).
func (pp *priorityPair) share(t *testing.T, window time.Duration) float64 {
	const burst = 100
	var a Args
	a.Uint64(0)
	before := pp.nb.Stats().GPUTime
	for el := time.Duration(0); el < window; el += 10 * time.Microsecond {
		pp.clk.advance(10 * time.Microsecond)
		for range burst {
			err := pp.nb.Stream().TryLaunch(pp.nbFn, Dim3{X: 10, Y: 1, Z: 1}, one, 0, &a)
			if err != nil {
				require.ErrorIs(t, err, ErrThrottled)
				break
			}
		}
	}
	return float64(pp.nb.Stats().GPUTime-before) / float64(window)
}

// The floor holds a neighbour with a GPU share to floor x share while the
// latency tenant has work in flight, and it gets its share back once that
// work is seen complete: here by the neighbour's own admission asking the
// driver, with nobody polling the latency tenant.
func TestBandwidthFloorWhileLatencyBusy(t *testing.T) {
	const share, floor = 0.5, 0.25
	pp := newPriorityPair(t, WithGPUShare(share), WithBandwidthFloor(floor))
	const window = 200 * time.Millisecond

	require.InEpsilon(t, share, pp.share(t, window), 0.03, "idle latency tenant")
	require.Zero(t, pp.nb.Stats().Bandwidth.FlooredLaunches)

	pp.busy(t)
	require.InEpsilon(t, share*floor, pp.share(t, window), 0.05, "latency tenant busy")
	floored := pp.nb.Stats().Bandwidth.FlooredLaunches
	require.NotZero(t, floored)
	require.True(t, pp.p.Stats().LatencyBusy, "latency tenant seen idle while its work is on the GPU")

	pp.release()
	require.True(t, pp.p.Stats().LatencyBusy, "nobody has looked yet")
	require.InEpsilon(t, share, pp.share(t, window), 0.03, "latency tenant done")
	require.False(t, pp.p.Stats().LatencyBusy)
	require.Equal(t, floored, pp.nb.Stats().Bandwidth.FlooredLaunches, "launches floored after the latency tenant finished")
}

// At share 1 (WithBandwidthFloor alone) the neighbour is free while the
// latency tenant is idle, held to the floor of the device while it is busy,
// and free again after: the latency tenant's Synchronize releases it.
func TestBandwidthFloorAtFullShare(t *testing.T) {
	const floor = 0.25
	pp := newPriorityPair(t, WithBandwidthFloor(floor))
	st := pp.nb.Stats()
	require.Equal(t, 1.0, st.GPUShare, "a floor without WithGPUShare is a share of 1")
	require.Equal(t, floor, st.Bandwidth.Floor)

	free := func() {
		var a Args
		a.Uint64(0)
		for range 1000 { // no clock advance: a limit would refuse
			require.NoError(t, pp.nb.Stream().TryLaunch(pp.nbFn, Dim3{X: 10, Y: 1, Z: 1}, one, 0, &a))
		}
	}
	free()
	pp.busy(t)
	require.InEpsilon(t, floor, pp.share(t, 200*time.Millisecond), 0.05)
	pp.release()
	require.NoError(t, pp.lat.Stream().Synchronize())
	require.False(t, pp.p.Stats().LatencyBusy, "the latency tenant's Synchronize saw its work complete")
	free()
}

// A neighbour without a floor, and tenants of a pool without a latency
// tenant, are not affected; a latency tenant's launches are counted busy
// only while in flight.
func TestPriorityLeavesOthersAlone(t *testing.T) {
	pp := newPriorityPair(t, WithGPUShare(0.5)) // no floor
	pp.busy(t)
	require.InEpsilon(t, 0.5, pp.share(t, 100*time.Millisecond), 0.03)
	pp.release()
	require.NoError(t, pp.lat.Stream().Synchronize())
	require.False(t, pp.p.Stats().LatencyBusy)

	// A metered Normal tenant never counts as busy.
	n, err := pp.p.NewTenant("normal", WithGPUMetering())
	require.NoError(t, err)
	defer n.Close()
	pp.drv.HoldEvents(true)
	defer pp.drv.HoldEvents(false)
	var a Args
	a.Uint64(0)
	require.NoError(t, n.Stream().Launch(t.Context(), spinKernel(t, n), one, one, 0, &a))
	require.False(t, pp.p.Stats().LatencyBusy)
}

func TestPriorityOptions(t *testing.T) {
	p, _ := openSim(t)
	for _, tc := range []struct {
		name string
		opts []TenantOption
		msg  string
	}{
		{"floor 0", []TenantOption{WithBandwidthFloor(0)}, "want a fraction in (0, 1]"},
		{"floor negative", []TenantOption{WithBandwidthFloor(-0.5)}, "want a fraction in (0, 1]"},
		{"floor above 1", []TenantOption{WithBandwidthFloor(1.5)}, "want a fraction in (0, 1]"},
		{"floor NaN", []TenantOption{WithBandwidthFloor(math.NaN())}, "want a fraction in (0, 1]"},
		{"unknown priority", []TenantOption{WithPriority(Priority(7))}, "Priority(7)"},
		{"floored latency tenant", []TenantOption{WithPriority(LatencyCritical), WithBandwidthFloor(0.5)}, "on a LatencyCritical tenant"},
		{"floor with launch-rate limit", []TenantOption{WithSMLimit(0.5), WithBandwidthFloor(0.5)}, "use WithGPUShare"},
		{"launch-rate limit after floor", []TenantOption{WithBandwidthFloor(0.5), WithSMLimit(0.5)}, "use WithGPUShare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.NewTenant("x", tc.opts...)
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	require.Empty(t, p.Stats().Tenants, "a refused tenant was made")

	// LatencyCritical meters the tenant; a floor keeps an explicit share.
	lat, err := p.NewTenant("lat", WithPriority(LatencyCritical))
	require.NoError(t, err)
	defer lat.Close()
	require.Equal(t, LatencyCritical, lat.Stats().Bandwidth.Priority)
	var a Args
	a.Uint64(0)
	require.NoError(t, lat.Stream().Launch(t.Context(), spinKernel(t, lat), one, one, 0, &a))
	require.NoError(t, lat.Stream().Synchronize())
	require.Equal(t, uint64(1), lat.Stats().Launches)
	nb, err := p.NewTenant("nb", WithBandwidthFloor(0.5), WithGPUShare(0.25))
	require.NoError(t, err)
	defer nb.Close()
	require.Equal(t, 0.25, nb.Stats().GPUShare)
	require.Equal(t, "latency-critical", LatencyCritical.String())
}

// Closing either tenant while the other waits: the neighbour's waiting
// launches end (ErrClosed when it is the one closed), the floor lifts when
// the latency tenant goes, nothing deadlocks and no event is left. Run
// with -race -count=20.
func TestPriorityCloseRaces(t *testing.T) {
	for _, first := range []string{"latency", "neighbour"} {
		t.Run(first, func(t *testing.T) {
			p, drv := openSim(t)
			drv.SetKernelDuration("spin", spinDuration)
			lat, err := p.NewTenant("latency", WithSMs(16), WithPriority(LatencyCritical))
			require.NoError(t, err)
			nb, err := p.NewTenant("batch", WithRestOfSMs(), WithBandwidthFloor(0.1),
				WithTenantRefillPeriod(200*time.Microsecond))
			require.NoError(t, err)
			latFn, nbFn := spinKernel(t, lat), spinKernel(t, nb)
			drv.HoldEventsIn(cuda.Context(lat.Context()), true)
			var la Args
			la.Uint64(0)
			require.NoError(t, lat.Stream().Launch(t.Context(), latFn, one, one, 0, &la)) // busy before the neighbours start
			require.True(t, p.Stats().LatencyBusy)

			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 4 {
				wg.Add(1)
				go func() { // neighbour launches, waiting at the floor
					defer wg.Done()
					var a Args
					a.Uint64(0)
					s := nb.Stream()
					if i%2 == 1 {
						var err error
						if s, err = nb.NewStream(ClassAttention); err != nil {
							errs <- ignoreClosed(err)
							return
						}
					}
					for n := 0; ; n++ {
						if err := s.Launch(t.Context(), nbFn, Dim3{X: 10, Y: 1, Z: 1}, one, 0, &a); err != nil {
							errs <- ignoreClosed(err)
							return
						}
						if first == "latency" && n > 200 {
							errs <- nil // the floor lifted and it ran on
							return
						}
					}
				}()
			}
			wg.Add(1)
			go func() { // latency launches, kept in flight
				defer wg.Done()
				var a Args
				a.Uint64(0)
				for {
					if err := lat.Stream().Launch(t.Context(), latFn, one, one, 0, &a); err != nil {
						errs <- ignoreClosed(err)
						return
					}
					_ = lat.Stats()
				}
			}()
			// The neighbour waits at the floor before anything closes.
			require.Eventually(t, func() bool {
				st := nb.Stats()
				return st.Throttled > 0 && st.Bandwidth.FlooredLaunches > 0
			}, 5*time.Second, 100*time.Microsecond)
			if first == "latency" {
				require.NoError(t, lat.Close())
				require.False(t, p.Stats().LatencyBusy, "floor still on after the latency tenant closed")
				wg.Wait()
				require.NoError(t, nb.Close())
			} else {
				require.NoError(t, nb.Close())
				require.NoError(t, lat.Close())
				wg.Wait()
			}
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			require.False(t, p.Stats().LatencyBusy)
			require.Zero(t, drv.Live().Events, "events left after Close")
		})
	}
}

func ignoreClosed(err error) error {
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// Stats.Bandwidth: achieved bandwidth from declared bytes, and a slowdown
// against the best each kernel shape has run, both over recent launches.
func TestBandwidthStats(t *testing.T) {
	p, drv := openSim(t)
	var dur time.Duration = 100 * time.Microsecond
	var mu sync.Mutex
	drv.SetKernelDuration("spin", func(_, _ cuda.Dim3) time.Duration { mu.Lock(); defer mu.Unlock(); return dur })
	tn, err := p.NewTenant("bw", WithGPUMetering())
	require.NoError(t, err)
	defer tn.Close()
	require.Zero(t, tn.Stats().Bandwidth.Slowdown, "nothing measured yet")
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	run := func(n int) {
		for range n {
			require.NoError(t, tn.Stream().Launch(t.Context(), fn, one, one, 0, &a))
		}
	}
	run(200) // undeclared: slowdown, no bandwidth
	bs := tn.Stats().Bandwidth
	require.InDelta(t, 1, bs.Slowdown, 1e-3)
	require.Zero(t, bs.BytesPerSecond)
	require.Zero(t, bs.BytesMoved)

	fn.SetBytesMoved(12_000_000) // 12 MB per 100 us: 120 GB/s
	require.Equal(t, uint64(12_000_000), fn.BytesMoved())
	run(100)
	bs = tn.Stats().Bandwidth
	require.InEpsilon(t, 120e9, bs.BytesPerSecond, 1e-3)
	require.Equal(t, uint64(100*12_000_000), bs.BytesMoved)

	// A neighbour slows the kernel by half: after several windows of it,
	// the recent figures say so.
	mu.Lock()
	dur = 150 * time.Microsecond
	mu.Unlock()
	run(int(5 * admission.BandwidthWindow / (150 * time.Microsecond)))
	bs = tn.Stats().Bandwidth
	require.InEpsilon(t, 1.5, bs.Slowdown, 0.02)
	require.InEpsilon(t, 80e9, bs.BytesPerSecond, 0.02)

	// An unmetered tenant has no figures.
	u, err := p.NewTenant("plain")
	require.NoError(t, err)
	defer u.Close()
	require.Equal(t, BandwidthStats{}, u.Stats().Bandwidth)
}

// A launch waiting at the floor when the latency tenant goes idle is woken
// and admitted at the full share: here share 1 on a stopped clock, so the
// floored charge would never be due, while the full share's is free.
func TestBandwidthFloorWaiterWokenWhenLatencyIdle(t *testing.T) {
	pp := newPriorityPair(t, WithBandwidthFloor(0.25))
	pp.busy(t)
	var a Args
	a.Uint64(0)
	s := pp.nb.Stream()
	for s.TryLaunch(pp.nbFn, Dim3{X: 10, Y: 1, Z: 1}, one, 0, &a) == nil { // empty the bucket; the clock never moves
	}
	done := make(chan error, 1)
	go func() { done <- s.Launch(t.Context(), pp.nbFn, Dim3{X: 10, Y: 1, Z: 1}, one, 0, &a) }()
	require.Eventually(t, func() bool { return pp.nb.Stats().Bandwidth.FlooredLaunches > 0 && len(done) == 0 }, time.Second, 100*time.Microsecond)
	select {
	case err := <-done:
		t.Fatalf("launch admitted at the floor on a stopped clock: %v", err)
	case <-time.After(5 * time.Millisecond):
	}
	pp.release()
	require.NoError(t, pp.lat.Stream().Synchronize()) // sees its work done: the floor lifts
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("a launch waiting at the floor was not woken when the latency tenant went idle")
	}
}

// A reservation made while a latency tenant is busy carries the floor's
// surcharge; a launch of it that the driver refuses gives back the whole
// charge, surcharge included (only the base was given back before).
func TestReservationFailedLaunchGivesBackTheSurcharge(t *testing.T) {
	fits := func(fail bool) int {
		pp := newPriorityPair(t, WithGPUShare(0.5), WithBandwidthFloor(0.25))
		// 30 us: 120 us a launch at the floor, 8 to a full bucket of 1 ms with
		// room to spare (an exact fit would hang on the nanosecond a refund
		// rounds down); the 90 us surcharge kept would leave 7.
		s, shape := pp.nb.Stream(), Dim3{X: 3, Y: 1, Z: 1}
		var a Args
		a.Uint64(0)
		require.NoError(t, s.TryLaunch(pp.nbFn, shape, one, 0, &a)) // measured: the estimate is 30 us
		require.NoError(t, s.Synchronize())
		pp.clk.advance(10 * time.Millisecond) // the bucket refills
		pp.busy(t)
		if fail {
			r, err := s.Reserve(pp.nbFn, shape, one)
			require.NoError(t, err)
			require.Zero(t, r.Delay())
			pp.drv.FailNext("cuLaunchKernel", cuda.ErrorLaunchOutOfResources)
			require.ErrorIs(t, r.Launch(t.Context(), 0, &a), cuda.ErrorLaunchOutOfResources)
		}
		n := 0
		for s.TryLaunch(pp.nbFn, shape, one, 0, &a) == nil { // the clock stands still
			n++
		}
		pp.release()
		return n
	}
	base := fits(false)
	require.Equal(t, 8, base)
	require.Equal(t, base, fits(true), "a failed reserved launch kept part of its charge")
}

// TestPriorityValuesAreConfigs: WithPriority hands internal/config the
// Priority's number, and SpinInDriver is config's too: the values must
// agree, or an option would mean another.
func TestPriorityValuesAreConfigs(t *testing.T) {
	require.Equal(t, config.Normal, config.Priority(Normal))
	require.Equal(t, config.LatencyCritical, config.Priority(LatencyCritical))
	require.Equal(t, config.SpinInDriver, SpinInDriver)
	for _, p := range []Priority{Normal, LatencyCritical, 7} {
		require.Equal(t, config.Priority(p).String(), p.String())
	}
}
