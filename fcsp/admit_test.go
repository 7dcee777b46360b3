package fcsp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// limitedSpin makes a tenant limited to f with its "spin" kernel; the fake
// driver runs it in no time, so only the bucket paces launches.
func limitedSpin(t *testing.T, f float64, opts ...TenantOption) (*Tenant, *Function) {
	t.Helper()
	p, _ := openSim(t)
	tn, err := p.NewTenant("limited", append([]TenantOption{WithSMLimit(f)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tn.Close() })
	fn := spinKernel(t, tn)
	return tn, fn
}

var (
	one   = Dim3{X: 1, Y: 1, Z: 1}
	whole = Dim3{X: 132 * 2, Y: 1, Z: 1} // with 1024-thread blocks: the H200's resident threads
	big   = Dim3{X: 1024, Y: 1, Z: 1}
	// A quarter wave costs about a third of the bucket (dampening and
	// penalty included) at a 0.5 limit.
	quarter = Dim3{X: 66, Y: 1, Z: 1}
)

// drainTenant launches until a launch would wait.
func drainTenant(t *testing.T, s *Stream, fn *Function) {
	t.Helper()
	var a Args
	a.Uint64(0)
	for s.TryLaunch(fn, whole, big, 0, &a) == nil {
	}
}

func TestLaunchDeadlineFailsFast(t *testing.T) {
	tn, fn := limitedSpin(t, 0.01, WithTenantRefillPeriod(100*time.Millisecond)) // a full wave per 10 s
	s := tn.Stream()
	drainTenant(t, s, fn)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var a Args
	a.Uint64(0)
	start := time.Now()
	err := s.Launch(ctx, fn, whole, big, 0, &a)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "would exceed context deadline")
	require.Less(t, time.Since(start), 45*time.Millisecond, "refused only after waiting")
	require.ErrorIs(t, s.TryLaunch(fn, whole, big, 0, &a), ErrThrottled)
}

// Tenant.Close and Stream.Close wake a launch waiting for tokens with
// ErrClosed (the issue saw Tenant.Close return 5 s later).
func TestCloseWakesWaitingLaunch(t *testing.T) {
	for _, which := range []string{"tenant", "stream"} {
		t.Run(which, func(t *testing.T) {
			tn, fn := limitedSpin(t, 0.01, WithTenantRefillPeriod(100*time.Millisecond))
			s := tn.Stream()
			if which == "stream" {
				var err error
				s, err = tn.NewStream(ClassDefault)
				require.NoError(t, err)
			}
			drainTenant(t, s, fn)
			done := make(chan error, 1)
			go func() {
				var a Args
				a.Uint64(0)
				done <- s.Launch(context.Background(), fn, whole, big, 0, &a)
			}()
			time.Sleep(2 * time.Millisecond) // let it start waiting (either order must end in ErrClosed)
			start := time.Now()
			if which == "tenant" {
				require.NoError(t, tn.Close())
			} else {
				require.NoError(t, s.Close())
			}
			select {
			case err := <-done:
				require.ErrorIs(t, err, ErrClosed)
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not wake the waiting launch")
			}
			require.Less(t, time.Since(start), time.Second)
		})
	}
}

// A change of share wakes a waiting launch to re-evaluate under the new
// rate.
func TestSetSMLimitWakesWaitingLaunch(t *testing.T) {
	tn, fn := limitedSpin(t, 0.01, WithTenantRefillPeriod(100*time.Millisecond)) // 10 s per wave
	s := tn.Stream()
	drainTenant(t, s, fn)
	done := make(chan error, 1)
	go func() {
		var a Args
		a.Uint64(0)
		done <- s.Launch(context.Background(), fn, one, one, 0, &a)
	}()
	time.Sleep(2 * time.Millisecond)
	// At 100% of a 1 us period, the backlog (kept in tokens) drains 100x
	// faster than it would have drained at 1%, and the period is shorter.
	require.NoError(t, tn.SetSMLimit(1))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("launch kept its old due time after the limit was raised")
	}
}

func TestReserveCancelAndLaunch(t *testing.T) {
	// A period long beside a loaded machine's stalls: at 1 ms the bucket
	// refilled between the drain and the Reserve on a 2-core CI host under
	// -race, and the first reservation had no delay to give back.
	tn, fn := limitedSpin(t, 0.5, WithTenantRefillPeriod(100*time.Millisecond))
	s := tn.Stream()
	drainTenant(t, s, fn)
	r, err := s.Reserve(fn, whole, big)
	require.NoError(t, err)
	require.Greater(t, r.Delay(), time.Duration(0))
	r.Cancel()
	// What was given back is there again: a second reservation waits no
	// longer than the first.
	r2, err := s.Reserve(fn, whole, big)
	require.NoError(t, err)
	require.LessOrEqual(t, r2.Delay(), r.Delay()+time.Millisecond)
	var a Args
	a.Uint64(0)
	before := s.Launches()
	require.NoError(t, r2.Launch(context.Background(), 0, &a))
	require.Equal(t, before+1, s.Launches())
	err = r2.Launch(context.Background(), 0, &a)
	require.Error(t, err, "a reservation launched twice")
	_, err = s.Reserve(fn, Dim3{}, one)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestTenantRefillPeriod(t *testing.T) {
	_, err := (&Pool{}).NewTenant("x", WithTenantRefillPeriod(0))
	require.ErrorIs(t, err, ErrInvalidArgument)
	// A 10x shorter period admits 10x the launches over the same time, on
	// a deterministic clock.
	count := func(period time.Duration) int {
		var clk simClock
		tn, fn := limitedSpin(t, 0.5, WithTenantRefillPeriod(period), withClock(clk.now))
		s := tn.Stream()
		var a Args
		a.Uint64(0)
		for s.TryLaunch(fn, quarter, big, 0, &a) == nil { // empty, no debt
		}
		n := 0
		for range 2000 { // 20 ms
			clk.advance(10 * time.Microsecond)
			for s.TryLaunch(fn, quarter, big, 0, &a) == nil {
				n++
			}
		}
		require.NoError(t, tn.Close())
		return n
	}
	slow, fast := count(10*time.Millisecond), count(time.Millisecond)
	// 0.5 of a period's threads per period, a third of them per launch:
	// about 1.5 launches per period.
	require.InDelta(t, 30, fast, 2, "launches in 20 ms with a 1 ms period")
	require.InDelta(t, 3, slow, 1, "launches in 20 ms with a 10 ms period")
}

// withClock makes the tenant's limiter read clock (tests).
func withClock(clock func() int64) TenantOption {
	return TenantOption{func(c *tenantConfig) error { c.Clock = clock; return nil }}
}
