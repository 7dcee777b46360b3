package fcsp

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// Issue 53 on the simulator: a tenant whose kernel never ends
// (spin(kernels.SpinForever), which the fake holds until released) is
// seen, contained and outlived.

// cuStream is s's handle as the fake takes it.
func cuStream(s *Stream) cuda.Stream { return cuda.Stream(s.Handle()) }

// forever launches a kernel that never ends on tn's first stream.
func forever(t *testing.T, tn *Tenant) {
	t.Helper()
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(kernels.SpinForever)
	require.NoError(t, tn.Stream().Launch(context.Background(), fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &a))
}

// A stalled partition is reported within its bound plus two ticks, once,
// everywhere a server looks (Health, Stats, the handler, the log); its
// next call is ErrStalled at once; its neighbours' calls go on, never
// waiting for it; its Close returns at once and says what it kept, and
// the pool's Close does not wait for it either.
func TestStalledTenantIsSeenAndContained(t *testing.T) {
	const bound = 50 * time.Millisecond
	var reports atomic.Int32
	handled := make(chan StallReport, 4)
	p, err := openSimErr(0, WithStallTimeout(bound), WithStallHandler(func(r StallReport) { reports.Add(1); handled <- r }))
	require.NoError(t, err)
	drv := simFake(p)
	defer drv.ReleaseSpins()
	defer func() {
		require.ErrorIs(t, p.Close(), ErrStalled, "the pool's Close names the stalled tenant, closed before it")
	}()
	inter, err := p.NewTenant("interactive", WithSMs(16))
	require.NoError(t, err)
	stuck, err := p.NewTenant("stuck", WithSMs(16))
	require.NoError(t, err)
	batch, err := p.NewTenant("batch", WithRestOfSMs(), WithTenantStallTimeout(NoStallTimeout))
	require.NoError(t, err)
	// The neighbours' calls race the stall throughout.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var served atomic.Int64
	for _, tn := range []*Tenant{inter, batch} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				require.NoError(t, tn.Do(context.Background(), func(Current) error { return nil }))
				ptr, err := tn.Alloc(context.Background(), 1<<20)
				require.NoError(t, err)
				require.NoError(t, tn.Free(ptr))
				require.NoError(t, tn.Stream().Synchronize())
				served.Add(1)
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	start := time.Now()
	forever(t, stuck)
	var r StallReport
	select {
	case r = <-handled:
	case <-time.After(10 * time.Second): // the latency is the GPU run's figure; a loaded host's -race run is slow
		t.Fatal("no stall reported")
	}
	found := time.Since(start)
	t.Logf("stall reported after %v (bound %v)", found, bound)
	require.GreaterOrEqual(t, found, bound, "reported before the bound")
	require.Equal(t, "stuck", r.Tenant)
	require.Equal(t, stuck.Stream().Handle(), r.Stream)
	require.Equal(t, "spin", r.Kernel)
	require.Equal(t, uint64(1), r.Queued)
	require.Equal(t, bound, r.Bound)
	h := p.Health()
	require.True(t, h.Healthy(), "the neighbours serve")
	require.True(t, h.RestartRequired)
	require.Len(t, h.Stalled, 1)
	require.Equal(t, "stuck", h.Stalled[0].Tenant)
	require.NotNil(t, stuck.Stats().Stalled)
	require.Nil(t, inter.Stats().Stalled)
	// Its next call: ErrStalled, at once.
	began := time.Now()
	_, err = stuck.Alloc(context.Background(), 4096)
	require.ErrorIs(t, err, ErrStalled)
	require.Less(t, time.Since(began), 10*time.Millisecond)
	require.ErrorIs(t, stuck.Do(context.Background(), func(Current) error { return nil }), ErrStalled)
	require.ErrorIs(t, stuck.Stream().Synchronize(), ErrStalled)
	var te *TenantError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "stuck", te.Tenant)
	// The neighbours go on.
	n := served.Load()
	require.Eventually(t, func() bool { return served.Load() > n+10 }, 5*time.Second, time.Millisecond)
	// Its Close returns at once, saying what it kept.
	closed := make(chan error, 1)
	go func() { closed <- stuck.Close() }()
	select {
	case err = <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the stalled tenant's Close waited for its stuck work")
	}
	require.ErrorIs(t, err, ErrStalled)
	require.ErrorContains(t, err, "kept until the process exits")
	require.Len(t, p.Health().Stalled, 1, "named until the process exits")
	require.Equal(t, int32(1), reports.Load(), "the handler runs once")
	time.Sleep(3 * bound)
	require.Equal(t, int32(1), reports.Load())
	require.Equal(t, []string{"batch", "interactive"}, p.Tenants())
}

// Work that takes longer than the bound in all but makes progress is no
// stall: the stream is held for less than the bound at a time, over and
// over; held past it, it is one.
func TestProgressIsNoStall(t *testing.T) {
	const bound = 300 * time.Millisecond // ten times each hold: a loaded host's sleeps overshoot
	stalls := make(chan StallReport, 1)
	p, err := openSimErr(0, WithStallTimeout(bound), WithStallHandler(func(r StallReport) { stalls <- r }))
	require.NoError(t, err)
	drv := simFake(p)
	tn, err := p.NewTenant("batch", WithSMs(16))
	require.NoError(t, err)
	defer runtime.KeepAlive(tn) // a collected handle is closed, and its stall never reported
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	s := tn.Stream()
	for range 12 { // 12 x 30 ms of held work, 360 ms in all
		release, err := drv.HoldStream(cuStream(s))
		require.NoError(t, err)
		require.NoError(t, s.Launch(context.Background(), fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &a))
		time.Sleep(bound / 10)
		release()
		require.NoError(t, s.Synchronize())
	}
	select {
	case r := <-stalls:
		t.Fatalf("progress read as a stall: %+v", r)
	default:
	}
	require.Nil(t, tn.Stats().Stalled)
	release, err := drv.HoldStream(cuStream(s))
	require.NoError(t, err)
	defer release()
	require.NoError(t, s.Launch(context.Background(), fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &a))
	select {
	case r := <-stalls:
		require.Equal(t, "batch", r.Tenant)
	case <-time.After(10 * time.Second):
		// Seen once in 20 runs of a long -race -count=20 selection
		// (2026-12-07, after the face's moves); what the pool says then:
		t.Fatalf("a stream held past the bound was not reported: health %+v, stats' stall %+v, stream %#x, its launches %d",
			p.Health(), tn.Stats().Stalled, s.Handle(), s.Launches())
	}
	require.ErrorIs(t, p.Close(), ErrStalled, "the pool's Close names what it left")
}

// A stalled unpartitioned tenant stops no move of the commons, nor the
// pool's Shutdown, which names it; a partition made after it is made,
// the other plain tenant moved off it.
func TestStalledPlainTenantStopsNoMove(t *testing.T) {
	const bound = 40 * time.Millisecond
	stalls := make(chan StallReport, 1)
	p, err := openSimErr(0, WithStallTimeout(bound), WithStallHandler(func(r StallReport) { stalls <- r }))
	require.NoError(t, err)
	fk := simFake(p)
	defer fk.ReleaseSpins()
	stuck, err := p.NewTenant("stuck")
	require.NoError(t, err)
	other, err := p.NewTenant("other")
	require.NoError(t, err)
	forever(t, stuck)
	<-stalls
	defer runtime.KeepAlive(stuck) // not collected (and closed) before the Shutdown below
	made := make(chan error, 1)
	go func() {
		_, err := p.NewTenant("part", WithSMs(16))
		made <- err
	}()
	select {
	case err := <-made:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("a move of the commons waited for the stalled tenant")
	}
	require.Equal(t, 116, other.SMs())
	require.NoError(t, other.Do(context.Background(), func(Current) error { return nil }))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err = p.Shutdown(ctx)
	took := time.Since(start)
	require.Less(t, took, 1100*time.Millisecond)
	require.ErrorIs(t, err, ErrStalled)
	require.ErrorContains(t, err, `"stuck"`)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "the close did not wait for the stuck work: %v", err)
}

// The watchdog never looks at a stream under capture (a query or an event
// there would break the capture): captures on a watched stream, ticked at
// 1 ms, all succeed.
func TestWatchdogLeavesCapturesAlone(t *testing.T) {
	p, _ := openSim(t, WithStallTimeout(20*time.Millisecond))
	tn, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	s := tn.Stream()
	ctx := context.Background()
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &a) })
		require.NoError(t, err)
		require.NoError(t, g.Close())
	}
	require.Nil(t, tn.Stats().Stalled)
}

// The watchdog's look races streams made, used and closed, their cores
// reused: run with -race. (A helper's storm server saw the look read a
// reused core's fields about 1 run in 25 when it checked before counting
// itself in; this test did not catch that here in 2 runs of 3 s: the fix
// follows acquire's order by reason, the test keeps the race in view.)
func TestWatchdogRacesStreamsMadeAndClosed(t *testing.T) {
	p, _ := openSim(t, WithStallTimeout(20*time.Millisecond))
	tn, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	stop := doLoop(4, func() {
		s, err := tn.NewStream(ClassDefault)
		require.NoError(t, err)
		_ = s.Handle()
		require.NoError(t, s.Close())
	})
	time.Sleep(time.Second)
	stop()
	require.Nil(t, tn.Stats().Stalled)
}
