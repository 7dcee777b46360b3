package fcsp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// libLaunch is what a library does inside Do: take the stream's handle from
// cur and launch on it through the raw driver, unseen by the SDK.
func libLaunch(cur Current, s *Stream, fn *Function, grid Dim3) error {
	h, err := cur.Stream(s)
	if err != nil {
		return err
	}
	var a Args
	a.Uint64(0)
	return cur.t.pool.drv.LaunchKernel(cur.t.cctx(), fn.k.H, grid.cuda(), one.cuda(), 0, h.h, &a.a)
}

// boundLaunch is what a library that kept a stream handle from an earlier
// Do does (cuBLAS after cublasSetStream): it launches on h, taking nothing
// from cur.
func boundLaunch(cur Current, h StreamHandle, fn *Function, grid Dim3) error {
	var a Args
	a.Uint64(0)
	return cur.t.pool.drv.LaunchKernel(cur.t.cctx(), fn.k.H, grid.cuda(), one.cuda(), 0, h.h, &a.a)
}

// A library binds a stream once (cuBLAS's cublasSetStream in the Do that
// made its handle) and later Dos only call it: their work is still the
// Do's, metered, and under a GPU share held to the share. (On the H200 the
// GEMM workload of examples/throttle ran at 0.90-1.01 of its unlimited rate
// at share 0.25, metered 0 ms, before such streams were timed.)
func TestDoMetersAStreamBoundEarlier(t *testing.T) {
	const share = 0.25
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	var clk simClock
	tn, err := p.NewTenant("share", WithGPUShare(share), withClock(clk.now))
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	ctx := t.Context()
	var h StreamHandle
	require.NoError(t, tn.Do(ctx, func(cur Current) (err error) {
		h, err = cur.Stream(nil) // bound, as cublasSetStream does; no work yet
		return err
	}))
	call := func(cur Current) error { return boundLaunch(cur, h, fn, us(1000)) }
	before := tn.Stats().GPUTime
	require.NoError(t, tn.TryDo(ctx, call))
	require.NoError(t, tn.Stream().Synchronize())
	require.InDelta(t, float64(time.Millisecond), float64(tn.Stats().GPUTime-before), 2e4, "a Do on a stream bound earlier was not metered")
	got := shareRun(t, tn, &clk, 500*time.Millisecond, func() bool {
		err := tn.TryDo(ctx, call)
		if err != nil {
			require.ErrorIs(t, err, ErrThrottled)
			return false
		}
		return true
	})
	require.InEpsilon(t, share, got, 0.05, "GPU-time fraction %.4f, want %.4f", got, share)
}

func us(n uint32) Dim3 { return Dim3{X: n / 10, Y: 1, Z: 1} } // spinDuration: 10 us per block

// Do's GPU time on a metered tenant is exact: library work on the streams
// f took, SDK launches inside and outside Do, a nested Do and a second Do
// joining the same stream's bracket are each counted once, per class, and
// only once their events complete.
func TestDoMeteringIsExact(t *testing.T) {
	for _, part := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "partitioned"}[part], func(t *testing.T) {
			p, drv := openSim(t)
			drv.SetKernelDuration("spin", spinDuration)
			opts := []TenantOption{WithGPUMetering()}
			if part {
				opts = append(opts, WithSMs(16))
			}
			tn, err := p.NewTenant("lib", opts...)
			require.NoError(t, err)
			defer tn.Close()
			fn := spinKernel(t, tn)
			att, err := tn.NewStream(ClassAttention)
			require.NoError(t, err)
			ctx := t.Context()
			var a Args
			a.Uint64(0)
			require.NoError(t, tn.Do(ctx, func(cur Current) error {
				// 30 us of library work on the first stream, 200 us on the
				// attention stream, and an SDK launch of 1 ms on each.
				if err := errors.Join(libLaunch(cur, nil, fn, us(10)), libLaunch(cur, nil, fn, us(20)), libLaunch(cur, att, fn, us(200))); err != nil {
					return err
				}
				if err := errors.Join(tn.Stream().Launch(ctx, fn, us(1000), one, 0, &a), att.Launch(ctx, fn, us(1000), one, 0, &a)); err != nil {
					return err
				}
				// A nested Do is part of this one: 40 us more.
				return tn.Do(ctx, func(cur Current) error { return libLaunch(cur, nil, fn, us(40)) })
			}))
			// An SDK launch after the Do: its own 100 us.
			require.NoError(t, tn.Stream().Launch(ctx, fn, us(100), one, 0, &a))
			st := tn.Stats()
			require.InDelta(t, float64(1170*time.Microsecond), float64(st.GPUTimeByClass[ClassDefault]), 1e3)
			require.InDelta(t, float64(1200*time.Microsecond), float64(st.GPUTimeByClass[ClassAttention]), 1e3)
			require.InDelta(t, float64(2370*time.Microsecond), float64(st.GPUTime), 2e3)

			// Not counted before the events complete; then counted once.
			drv.HoldEvents(true)
			require.NoError(t, tn.Do(ctx, func(cur Current) error { return libLaunch(cur, att, fn, us(500)) }))
			require.Equal(t, st.GPUTime, tn.Stats().GPUTime, "Do's time counted before its events completed")
			drv.HoldEvents(false)
			require.InDelta(t, float64(2870*time.Microsecond), float64(tn.Stats().GPUTime), 2e3)
			require.InDelta(t, float64(2870*time.Microsecond), float64(tn.Stats().GPUTime), 2e3, "counted twice")

			// Work on a stream an earlier Do handed out is seen, whatever
			// handle it is queued by (a library keeps the one it was given).
			require.NoError(t, tn.Do(ctx, func(cur Current) error {
				return cur.t.pool.drv.LaunchKernel(cur.t.cctx(), fn.k.H, us(300).cuda(), one.cuda(), 0, cuda.Stream(att.Handle()), &a.a)
			}))
			require.InDelta(t, float64(3170*time.Microsecond), float64(tn.Stats().GPUTime), 2e3)
			// Work on a stream no Do ever handed out is not seen.
			other, err := tn.NewStream(ClassDefault)
			require.NoError(t, err)
			require.NoError(t, tn.Do(ctx, func(cur Current) error {
				return cur.t.pool.drv.LaunchKernel(cur.t.cctx(), fn.k.H, us(300).cuda(), one.cuda(), 0, cuda.Stream(other.Handle()), &a.a)
			}))
			require.InDelta(t, float64(3170*time.Microsecond), float64(tn.Stats().GPUTime), 2e3)
		})
	}
}

// Two Dos that take the same stream at once (an unpartitioned tenant's Do
// excludes nothing) share one bracket: the tenant's total stays exact.
func TestDoMeteringJoinedBracket(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	tn, err := p.NewTenant("lib", WithGPUMetering())
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	ctx := t.Context()
	require.NoError(t, tn.Do(ctx, func(cur Current) error {
		if err := libLaunch(cur, nil, fn, us(100)); err != nil {
			return err
		}
		inner := make(chan error)
		go func() {
			inner <- tn.Do(ctx, func(cur Current) error { return libLaunch(cur, nil, fn, us(50)) })
		}()
		if err := <-inner; err != nil {
			return err
		}
		return libLaunch(cur, nil, fn, us(20))
	}))
	require.InDelta(t, float64(170*time.Microsecond), float64(tn.Stats().GPUTime), 1e3)
	// A Do that takes no stream costs no events and counts nothing.
	live := drv.Live().Events
	require.NoError(t, tn.Do(ctx, func(Current) error { return nil }))
	require.Equal(t, live, drv.Live().Events)
	require.InDelta(t, float64(170*time.Microsecond), float64(tn.Stats().GPUTime), 1e3)
}

// An unmetered tenant's Do records no events: metering costs only where
// asked.
func TestDoUnmeteredRecordsNoEvents(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	tn, err := p.NewTenant("plain")
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	before := drv.Live().Events
	require.NoError(t, tn.Do(t.Context(), func(cur Current) error { return libLaunch(cur, nil, fn, us(100)) }))
	require.Equal(t, before, drv.Live().Events)
	require.Zero(t, tn.Stats().GPUTime)
}

// shareRun drives a tenant under WithGPUShare(share) on a deterministic
// clock for window: every 100 us of the clock it admits as much as the
// limiter allows through admit (which reports false when throttled), and
// returns the fraction of the window the tenant's metered GPU time took.
func shareRun(t *testing.T, tn *Tenant, clk *simClock, window time.Duration, admit func() bool) float64 {
	t.Helper()
	start := tn.Stats().GPUTime
	const step = 100 * time.Microsecond
	for el := time.Duration(0); el < window; el += step {
		clk.advance(step)
		for admit() {
		}
	}
	return float64(tn.Stats().GPUTime-start) / float64(window)
}

// A tenant whose work all goes through Do gets its share of the device's
// time under WithGPUShare, whatever the library work's length (10 us, 1 ms,
// 2 ms: twice the bucket), its class, and whether f also launches through
// the SDK; an unlimited tenant beside it (share 1) is never refused.
func TestDoGPUShare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lib    uint32 // us of library work per Do
		sdk    uint32 // us of SDK launches inside the Do, 0: none
		class  Class
		factor float64
	}{
		{"lib-10us", 10, 0, ClassDefault, 1},
		{"lib-1ms", 1000, 0, ClassDefault, 1},
		{"lib-2ms", 2000, 0, ClassDefault, 1},
		{"lib-300us+sdk-200us", 300, 200, ClassDefault, 1},
		{"lib-1ms-attention", 1000, 0, ClassAttention, 0.8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const share = 0.25
			p, drv := openSim(t)
			drv.SetKernelDuration("spin", spinDuration)
			var clk simClock
			tn, err := p.NewTenant("share", WithGPUShare(share), WithStreamClass(tc.class), withClock(clk.now))
			require.NoError(t, err)
			defer tn.Close()
			free, err := p.NewTenant("free", WithGPUShare(1), withClock(clk.now))
			require.NoError(t, err)
			defer free.Close()
			fn, ffn := spinKernel(t, tn), spinKernel(t, free)
			var a Args
			a.Uint64(0)
			work := func(tn *Tenant, fn *Function) func(Current) error {
				return func(cur Current) error {
					if err := libLaunch(cur, nil, fn, us(tc.lib)); err != nil || tc.sdk == 0 {
						return err
					}
					// Admitted on its own (its time is not the Do's): on the
					// frozen clock, without waiting.
					return tn.Stream().TryLaunch(fn, us(tc.sdk), one, 0, &a)
				}
			}
			f, ff := work(tn, fn), work(free, ffn)
			ctx := t.Context()
			const window = 500 * time.Millisecond
			freeDos := 0
			got := shareRun(t, tn, &clk, window, func() bool {
				// The neighbour runs one Do per step: never refused.
				require.NoError(t, free.TryDo(ctx, ff))
				freeDos++
				err := tn.TryDo(ctx, f)
				if err != nil {
					require.ErrorIs(t, err, ErrThrottled)
					return false
				}
				return true
			})
			// The GPU-time share holds (a class charged less gets more); the
			// unlimited neighbour did all it asked.
			want := share / tc.factor
			require.InEpsilon(t, want, got, 0.05, "GPU-time fraction %.4f, want %.4f", got, want)
			// (each event's time is a float32 of milliseconds)
			require.InEpsilon(t, float64(time.Duration(freeDos)*time.Duration(tc.lib+tc.sdk)*time.Microsecond), float64(free.Stats().GPUTime), 1e-4)
			require.Zero(t, free.Stats().Throttled)
		})
	}
}

// Graphs launched on a metered stream are timed on the GPU clock (exactly:
// the sum of their kernels), and under WithGPUShare admitted from the
// graph's running estimate and corrected, so the share holds for graphs.
func TestGraphMeteringAndShare(t *testing.T) {
	t.Run("exact", func(t *testing.T) {
		p, drv := openSim(t)
		drv.SetKernelDuration("spin", spinDuration)
		tn, err := p.NewTenant("g", WithGPUMetering(), WithSMs(16), WithStreamClass(ClassAttention))
		require.NoError(t, err)
		defer tn.Close()
		e := spinGraph(t, tn, 10, 20, 30)
		for range 7 {
			require.NoError(t, tn.Stream().LaunchGraph(t.Context(), e))
		}
		st := tn.Stats()
		require.InDelta(t, float64(7*60*time.Microsecond), float64(st.GPUTimeByClass[ClassAttention]), 1e3)
		require.Equal(t, st.GPUTimeByClass[ClassAttention], st.GPUTime)
		require.Equal(t, uint64(21), st.Launches)
	})
	for _, tc := range []struct {
		name  string
		us    []uint32
		share float64
	}{
		{"60us", []uint32{10, 20, 30}, 0.25},
		{"1500us", []uint32{500, 1000}, 0.25},
		{"2ms", []uint32{2000}, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, drv := openSim(t)
			drv.SetKernelDuration("spin", spinDuration)
			var clk simClock
			tn, err := p.NewTenant("g", WithGPUShare(tc.share), withClock(clk.now))
			require.NoError(t, err)
			defer tn.Close()
			e := spinGraph(t, tn, tc.us...)
			got := shareRun(t, tn, &clk, 300*time.Millisecond, func() bool {
				// A deadline the limiter cannot meet fails at once: this
				// is TryLaunch for a graph on the frozen test clock.
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Microsecond)
				defer cancel()
				err := tn.Stream().LaunchGraph(ctx, e)
				if err != nil {
					require.ErrorIs(t, err, context.DeadlineExceeded)
					return false
				}
				return true
			})
			require.InEpsilon(t, tc.share, got, 0.05, "GPU-time fraction %.4f, want %.4f", got, tc.share)
		})
	}
}

// spinGraph captures spin kernels of the given lengths (us) on the tenant's
// first stream and instantiates them.
func spinGraph(t *testing.T, tn *Tenant, lengths ...uint32) *GraphExec {
	t.Helper()
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	s := tn.Stream()
	g, err := s.Capture(t.Context(), func() error {
		for _, l := range lengths {
			if err := s.Launch(t.Context(), fn, us(l), one, 0, &a); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())
	return e
}

// A Do waiting for GPU-share tokens: ctx ends the wait with nothing
// charged and f not run; a deadline the wait cannot meet fails at once;
// Close wakes it with ErrClosed.
func TestDoShareWaitHonoursCtxAndClose(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	// A 1 s refill period at 0.25: an empty bucket refills in 4 s.
	tn, err := p.NewTenant("w", WithGPUShare(0.25), WithTenantRefillPeriod(time.Second), WithSMs(16))
	require.NoError(t, err)
	fn := spinKernel(t, tn)
	drv.HoldEvents(true) // nothing completes: no correction refills the bucket
	ctx := t.Context()
	ran := false
	g := func(cur Current) error { ran = true; return libLaunch(cur, nil, fn, us(10)) }
	require.NoError(t, tn.Do(ctx, g)) // a first call is charged a whole period: the bucket
	require.True(t, ran)
	ran = false
	require.ErrorIs(t, tn.TryDo(ctx, g), ErrThrottled)

	dl, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = tn.Do(dl, g)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Millisecond, "a deadline the wait cannot meet fails at once")

	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tn.Do(cctx, g) }()
	time.Sleep(2 * time.Millisecond)
	ccancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.False(t, ran, "f ran without its tokens")

	go func() { done <- tn.Do(ctx, g) }()
	time.Sleep(2 * time.Millisecond) // let it wait (if Close comes first, it says ErrClosed all the same)
	start = time.Now()
	require.NoError(t, tn.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(time.Second):
		t.Fatal("Close did not wake the waiting Do")
	}
	require.Less(t, time.Since(start), 500*time.Millisecond)
	require.False(t, ran)
	require.Zero(t, drv.Live().Events, "events left after Close")
}

// The tenant's Close destroys the graphs and instantiated graphs left
// (before: they leaked in the driver).
func TestCloseDestroysGraphs(t *testing.T) {
	p, drv := openSim(t)
	tn, err := p.NewTenant("g", WithSMs(16))
	require.NoError(t, err)
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	s := tn.Stream()
	g, err := s.Capture(t.Context(), func() error { return s.Launch(t.Context(), fn, one, one, 0, &a) })
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	e2, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, e2.Close())
	graphs, execs := drv.Graphs()
	require.Equal(t, [2]int{1, 1}, [2]int{graphs, execs})
	require.NoError(t, tn.Close())
	graphs, execs = drv.Graphs()
	require.Equal(t, [2]int{0, 0}, [2]int{graphs, execs}, "graphs left after the tenant's Close")
	// Closing them after the tenant is a no-op, and launching is ErrClosed.
	require.NoError(t, g.Close())
	require.NoError(t, e.Close())
	require.ErrorIs(t, s.LaunchGraph(t.Context(), e), ErrClosed)
}

// Close races Do (metered, under a share, with library and SDK work and
// nested Do), LaunchGraph, Instantiate and graph Closes: every call works
// or says ErrClosed, and no event, graph or exec is left (-race -count=20).
func TestCloseRacesDoAndLaunchGraph(t *testing.T) {
	for _, part := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "partitioned"}[part], func(t *testing.T) {
			p, drv := openSim(t)
			drv.SetKernelDuration("spin", spinDuration)
			opts := []TenantOption{WithGPUShare(0.5)}
			if part {
				opts = append(opts, WithSMs(16))
			}
			tn, err := p.NewTenant("racy", opts...)
			require.NoError(t, err)
			fn := spinKernel(t, tn)
			e := spinGraph(t, tn, 10, 10)
			ctx := t.Context()
			var a Args
			a.Uint64(0)
			var wg sync.WaitGroup
			errc := make(chan error, 16)
			loops := 0
			loop := func(call func() error) {
				wg.Add(1)
				loops++
				i := loops
				go func() {
					defer wg.Done()
					for {
						if err := call(); err != nil {
							if !errors.Is(err, ErrClosed) {
								errc <- fmt.Errorf("loop %d: %w", i, err)
							}
							return
						}
					}
				}()
			}
			loop(func() error {
				return tn.Do(ctx, func(cur Current) error {
					if err := libLaunch(cur, nil, fn, us(10)); err != nil {
						return err
					}
					if err := tn.Stream().Launch(ctx, fn, us(10), one, 0, &a); err != nil {
						return err
					}
					return tn.Do(ctx, func(cur Current) error { return libLaunch(cur, nil, fn, us(10)) })
				})
			})
			loop(func() error {
				s, err := tn.NewStream(ClassAttention)
				if err != nil {
					return err
				}
				return errors.Join(tn.Do(ctx, func(cur Current) error { return libLaunch(cur, s, fn, us(10)) }), s.Close())
			})
			loop(func() error { return tn.Stream().LaunchGraph(ctx, e) })
			loop(func() error {
				s, err := tn.NewStream(ClassDefault)
				if err != nil {
					return err
				}
				defer s.Close()
				g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, one, one, 0, &a) })
				if err != nil {
					return err
				}
				x, err := g.Instantiate()
				if err != nil {
					return err
				}
				if err := s.LaunchGraph(ctx, x); err != nil {
					return err
				}
				if time.Now().UnixNano()%2 == 0 {
					return errors.Join(g.Close(), x.Close()) // else left for the tenant's Close
				}
				return nil
			})
			stopStats := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stopStats:
						return
					default:
						_ = tn.Stats()
					}
				}
			}()
			time.Sleep(2 * time.Millisecond)
			require.NoError(t, tn.Close())
			close(stopStats)
			wg.Wait()
			close(errc)
			for err := range errc {
				require.NoError(t, err)
			}
			require.Zero(t, drv.Live().Events, "events left after Close")
			graphs, execs := drv.Graphs()
			require.Equal(t, [2]int{0, 0}, [2]int{graphs, execs}, "graphs left after Close")
		})
	}
}

// A Do and a graph launch waiting for GPU-share tokens are woken by a
// change of share and charged at the new one: at share 1, nothing.
func TestDoAndGraphWaitersFollowAChangeOfShare(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	tn, err := p.NewTenant("w", WithGPUShare(0.25), WithTenantRefillPeriod(time.Second))
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	e := spinGraph(t, tn, 10)
	drv.HoldEvents(true) // no correction refills the bucket
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	f := func(cur Current) error { return libLaunch(cur, nil, fn, us(10)) }
	require.NoError(t, tn.Do(ctx, f)) // a whole period: the bucket is empty for 4 s
	done := make(chan error, 2)
	go func() { done <- tn.Do(ctx, f) }()
	go func() { done <- tn.Stream().LaunchGraph(ctx, e) }()
	time.Sleep(2 * time.Millisecond)
	start := time.Now()
	require.NoError(t, tn.SetSMLimit(1))
	for range 2 {
		require.NoError(t, <-done)
	}
	require.Less(t, time.Since(start), time.Second, "the waiters did not follow the change of share")
}

// A Current kept past its Do cannot open a bracket that would never close:
// taking a stream from it is refused, and metering stays exact after.
func TestDoCurrentAfterDoIsRefused(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	tn, err := p.NewTenant("m", WithGPUMetering())
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	var kept Current
	require.NoError(t, tn.Do(t.Context(), func(cur Current) error { kept = cur; return libLaunch(cur, nil, fn, us(10)) }))
	_, err = kept.Stream(nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, tn.Do(t.Context(), func(cur Current) error { return libLaunch(cur, nil, fn, us(20)) }))
	var a Args
	a.Uint64(0)
	require.NoError(t, tn.Stream().Launch(t.Context(), fn, us(40), one, 0, &a))
	require.InDelta(t, float64(70*time.Microsecond), float64(tn.Stats().GPUTime), 1e3)
}

// Stats of a metered partitioned tenant waits for a Do's exclusion to poll
// the streams, without holding the tenant's lock meanwhile: f's own calls
// that take it (NewStream) go on. Before, Stats held it while waiting, and
// the two deadlocked.
func TestStatsDuringDoDoesNotDeadlock(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("m", WithGPUMetering(), WithSMs(16))
	require.NoError(t, err)
	defer tn.Close()
	statsDone := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- tn.Do(t.Context(), func(cur Current) error {
			go func() { _ = tn.Stats(); close(statsDone) }()
			time.Sleep(2 * time.Millisecond) // Stats now waits for this Do's exclusion
			s, err := tn.NewStream(ClassDefault)
			if err != nil {
				return err
			}
			return s.Close()
		})
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Stats and a Do's NewStream deadlocked")
	}
	<-statsDone
}

// A Do of a partitioned tenant under a GPU share, waiting for the
// exclusion another Do holds, still ends when ctx does.
func TestDoShareHonoursCtxWhileAnotherDoRuns(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("m", WithGPUShare(0.5), WithSMs(16), WithConcurrentDos(1))
	require.NoError(t, err)
	defer tn.Close()
	inF, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- tn.Do(t.Context(), func(cur Current) error {
			if _, err := cur.Stream(nil); err != nil {
				return err
			}
			close(inF)
			<-release
			return nil
		})
	}()
	<-inF
	time.Sleep(3 * time.Millisecond) // the bucket refills (2 ms at 0.5) the first Do's charge
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = tn.TryDo(ctx, func(Current) error { return nil })
	took := time.Since(start)
	close(release)
	require.NoError(t, <-first)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, time.Second)
}

// A LatencyCritical tenant's Do work in flight counts as busy for the
// pool's floors, as its launches do, until its bracket completes.
func TestDoBracketMarksALatencyTenantBusy(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	tn, err := p.NewTenant("lat", WithPriority(LatencyCritical), WithSMs(16))
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	drv.HoldEvents(true)
	require.NoError(t, tn.Do(t.Context(), func(cur Current) error { return libLaunch(cur, nil, fn, us(100)) }))
	require.Equal(t, int64(1), int64(p.prio.Busy()), "Do's work in flight not counted busy")
	drv.HoldEvents(false)
	require.InDelta(t, float64(100*time.Microsecond), float64(tn.Stats().GPUTime), 1e3)
	require.Zero(t, int64(p.prio.Busy()))
}

// A floored neighbour's Do and graph launches yield like its kernels: held
// to the floor of the device while the latency tenant has work in flight,
// free again once it is idle.
func TestDoAndGraphYieldToTheFloor(t *testing.T) {
	const floor = 0.25
	pp := newPriorityPair(t, WithBandwidthFloor(floor))
	e := spinGraph(t, pp.nb, 40, 60) // 100 us
	do := func(cur Current) error { return libLaunch(cur, nil, pp.nbFn, us(100)) }
	// One 100 us unit of work offered per 100 us of the clock: all of it
	// fits when free, a floor's worth when held.
	frac := func(admit func() error) float64 {
		const window, step = 100 * time.Millisecond, 100 * time.Microsecond
		before := pp.nb.Stats().GPUTime
		for el := time.Duration(0); el < window; el += step {
			pp.clk.advance(step)
			if err := admit(); err != nil {
				require.ErrorIs(t, err, context.DeadlineExceeded)
			}
		}
		return float64(pp.nb.Stats().GPUTime-before) / float64(window)
	}
	tryDo := func() error {
		err := pp.nb.TryDo(t.Context(), do)
		if errors.Is(err, ErrThrottled) {
			return context.DeadlineExceeded
		}
		return err
	}
	graph := func() error {
		// A wait the deadline cannot cover fails at once (the clock is
		// frozen); the margin keeps a slow admission (-race) from expiring.
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Microsecond)
		defer cancel()
		return pp.nb.Stream().LaunchGraph(ctx, e)
	}
	for name, admit := range map[string]func() error{"Do": tryDo, "graph": graph} {
		require.InEpsilon(t, 1, frac(admit), 0.03, "%s: idle latency tenant", name)
		pp.busy(t)
		require.InEpsilon(t, floor, frac(admit), 0.05, "%s: latency tenant busy", name)
		pp.release()
		_ = pp.lat.Stats() // seen idle
		require.InEpsilon(t, 1, frac(admit), 0.03, "%s: latency tenant done", name)
	}
}

// While a latency tenant's Do is running, its bracket is open and nothing of
// it is queued as pending yet: a floored neighbour's look at the latency
// streams (refresh) must not count the stream idle then.
func TestOpenDoBracketStaysBusyForNeighbours(t *testing.T) {
	pp := newPriorityPair(t, WithBandwidthFloor(0.25))
	require.NoError(t, pp.lat.Do(t.Context(), func(cur Current) error {
		if err := libLaunch(cur, nil, pp.latFn, us(100)); err != nil {
			return err
		}
		pp.p.prio.Refresh() // what a floored neighbour's admission does
		if !pp.p.Stats().LatencyBusy {
			return errors.New("the latency tenant was counted idle while its Do ran")
		}
		return nil
	}))
}
