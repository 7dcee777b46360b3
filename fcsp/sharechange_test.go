package fcsp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Lag after a change of share, down: a tenant launching flat out at share
// 1 (admitted free, so its bucket is full) is lowered to f. Its first
// refused launch must come within one refill period of the change: on the
// H200 it came after 1.21 ms with a 1 ms period, the full bucket draining
// at (1 - f). The clock advances by each kernel's GPU time, as if the GPU
// paced the launches.
func TestGPUShareDownLagWithinOnePeriod(t *testing.T) {
	for _, f := range []float64{0.25, 0.5} {
		p, drv := openSim(t)
		drv.SetKernelDuration("spin", spinDuration)
		var clk simClock
		tn, err := p.NewTenant("lag", WithGPUShare(1), withClock(clk.now), WithTenantRefillPeriod(time.Millisecond))
		require.NoError(t, err)
		fn := spinKernel(t, tn)
		var a Args
		a.Uint64(0)
		grid := Dim3{X: 10, Y: 1, Z: 1} // 100 us
		s := tn.Stream()
		for i := range 50 {
			require.NoError(t, s.TryLaunch(fn, grid, one, 0, &a), "launch %d at share 1", i)
			clk.advance(100 * time.Microsecond)
		}
		require.NoError(t, tn.SetSMLimit(f))
		var lag time.Duration
		for {
			err := s.TryLaunch(fn, grid, one, 0, &a)
			if errors.Is(err, ErrThrottled) {
				break
			}
			require.NoError(t, err)
			clk.advance(100 * time.Microsecond)
			lag += 100 * time.Microsecond
			require.Less(t, lag, 50*time.Millisecond, "share %v: never throttled", f)
		}
		require.LessOrEqual(t, lag, time.Millisecond, "share 1 -> %v: first throttled launch %v after the change; want at most one refill period", f, lag)
		require.NoError(t, tn.Close())
	}
}

// Lag after a change of share, up: a launch waiting at share 0.25 when the
// share goes to 1 is admitted at once, charged the new share's cost (0: a
// share of 1 is no limit), on a clock that never moves. Re-checking with
// the cost it computed at 0.25 it would wait for tokens that never come.
func TestGPUShareUpWakesWaiterAtNewCost(t *testing.T) {
	p, drv := openSim(t)
	drv.SetKernelDuration("spin", spinDuration)
	var clk simClock // frozen
	tn, err := p.NewTenant("up", WithGPUShare(0.25), withClock(clk.now))
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	grid := Dim3{X: 50, Y: 1, Z: 1} // 500 us
	s := tn.Stream()
	// A launch that starts only after the raise (a busy host) sees share 1
	// and does not wait: then lower the share and try again, longer.
	for attempt := 1; ; attempt++ {
		for s.TryLaunch(fn, grid, one, 0, &a) == nil {
		}
		before := tn.Stats().Throttled
		done := make(chan error, 1)
		go func() { done <- s.Launch(context.Background(), fn, grid, one, 0, &a) }()
		time.Sleep(time.Duration(attempt) * 2 * time.Millisecond) // let it start waiting
		require.NoError(t, tn.SetSMLimit(1))
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting launch kept the cost it computed at share 0.25")
		}
		if tn.Stats().Throttled == before+1 {
			break // it waited, and the raise woke it
		}
		require.Less(t, attempt, 20, "the launch never started waiting before the raise")
		require.NoError(t, tn.SetSMLimit(0.25))
	}
	// At share 1 nothing waits, on the same frozen clock.
	for range 10 {
		require.NoError(t, s.TryLaunch(fn, grid, one, 0, &a))
	}
}

// Hostile timing: SetSMLimit races waiting launches on several streams
// and Tenant.Close. Every launch returns nil or ErrClosed, none hangs, and
// SetSMLimit never fails on a valid share, before or after Close.
func TestSetSMLimitRacesCloseAndWaitingLaunches(t *testing.T) {
	for _, model := range []string{"gpu share", "launch rate"} {
		t.Run(model, func(t *testing.T) {
			p, drv := openSim(t)
			drv.SetKernelDuration("spin", spinDuration)
			var clk simClock
			opt := WithGPUShare(0.25)
			if model == "launch rate" {
				opt = WithSMLimit(0.25)
			}
			tn, err := p.NewTenant("race", opt, withClock(clk.now))
			require.NoError(t, err)
			fn := spinKernel(t, tn)
			streams := []*Stream{tn.Stream()}
			for range 2 {
				s, err := tn.NewStream(ClassDefault)
				require.NoError(t, err)
				streams = append(streams, s)
			}
			var launches sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 8 {
				s := streams[i%len(streams)]
				launches.Add(1)
				go func() {
					defer launches.Done()
					var a Args
					a.Uint64(0)
					for {
						err := s.Launch(context.Background(), fn, Dim3{X: 30, Y: 1, Z: 1}, big, 0, &a)
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			var stop atomic.Bool
			var bg sync.WaitGroup
			bg.Add(2)
			go func() { // the clock moves, so launches get through
				defer bg.Done()
				for !stop.Load() {
					clk.advance(20 * time.Microsecond)
					time.Sleep(5 * time.Microsecond)
				}
			}()
			go func() {
				defer bg.Done()
				for i := 0; !stop.Load(); i++ {
					if err := tn.SetSMLimit([]float64{1, 0.25, 0.5, 0.1}[i%4]); errors.Is(err, ErrClosed) {
						return // after Close, as every call (issue 38 #6)
					} else if err != nil {
						errs <- err
						return
					}
				}
			}()
			time.Sleep(5 * time.Millisecond)
			require.NoError(t, tn.Close())
			done := make(chan struct{})
			go func() { launches.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("a launch did not return after Tenant.Close")
			}
			stop.Store(true)
			bg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
