package fcsp

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/place"
)

// Issue 39, round 4: DoEach, graphs and Reshape's gate. The tests wait for
// a goroutine to block where the race needs it (waitForStack), so that
// each race is run, not hoped for.

// waitForStack waits until some goroutine's stack holds every one of
// frames (a goroutine blocked where a race needs it).
func waitForStack(t *testing.T, frames ...string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			all := true
			for _, f := range frames {
				all = all && strings.Contains(g, f)
			}
			if all {
				return
			}
		}
	}
	t.Fatalf("no goroutine reached %q", frames)
}

// settle waits for done, or fails the test as a deadlock after a minute,
// having called undo to break it (so that the pool's Close can end).
func settle(t *testing.T, done <-chan struct{}, undo func(), what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		undo()
		<-done
		t.Fatalf("deadlock: %s", what)
	}
}

// Issue 39 #2: a LaunchGraph that waited out a Reshape at its gate launched
// the graph captured for the old layout, with a nil error: its layout was
// checked before the wait. It is checked after now.
func TestLaunchGraphThatWaitsOutAReshapeIsStale(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16))
	require.NoError(t, err)
	fn := spinKernel(t, a)
	ctx := context.Background()
	var args Args
	args.Uint64(0)
	s := a.Stream()
	g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args) })
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())

	// A Do in flight keeps the Reshape's gate shut while the launch comes.
	inDo, endDo := make(chan struct{}), make(chan struct{})
	doDone := make(chan error, 1)
	go func() { doDone <- a.Do(ctx, func(Current) error { close(inDo); <-endDo; return nil }) }()
	<-inDo
	reshaped := make(chan error, 1)
	go func() { reshaped <- a.Reshape(ctx, 16) }()
	waitForStack(t, "(*tenantCore).Reshape", "(*Engine).hold") // the gate is shut
	launched := make(chan error, 1)
	go func() { launched <- s.LaunchGraph(ctx, x) }()
	waitForStack(t, "(*Stream).LaunchGraph", "(*pauseGate).wait")
	old := s.c.h()
	before := drv.StreamLaunches(old)
	close(endDo)
	require.NoError(t, <-doDone)
	require.NoError(t, <-reshaped)
	require.ErrorIs(t, <-launched, ErrStaleGraph, "a graph captured at 8 SMs launched after the tenant became 16")
	require.Equal(t, before, drv.StreamLaunches(old))
	require.Zero(t, drv.StreamLaunches(s.c.h()), "the stale graph reached the driver")
	require.NoError(t, x.Close())
}

// Issue 39 #2: the stale check compares layout numbers for every
// placement, not only a reshapable tenant's: an exec whose layout is not
// its tenant's now is refused, whatever moved it.
func TestStaleGraphCheckedOnEveryPlacement(t *testing.T) {
	p, _ := openSim(t)
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{{"unpartitioned", nil}, {"partitioned", []TenantOption{WithSMs(8)}}} {
		a, err := p.NewTenant(tc.name, tc.opts...)
		require.NoError(t, err)
		fn := spinKernel(t, a)
		ctx := context.Background()
		var args Args
		args.Uint64(0)
		s := a.Stream()
		g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args) })
		require.NoError(t, err)
		x, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, s.LaunchGraph(ctx, x), tc.name)
		was := a.c.place
		a.c.place = placement{movedPlace{was.Placement.(place.Slotted), was.Layout() + 1}} // as if the placement had moved since the capture
		err = s.LaunchGraph(ctx, x)
		a.c.place = was
		require.ErrorIs(t, err, ErrStaleGraph, tc.name)
		require.ErrorContains(t, err, "capture it again")
		require.NoError(t, x.Close())
		require.NoError(t, g.Close())
		require.NoError(t, a.Close())
	}
}

// movedPlace is a placement of green contexts whose layout has moved on.
type movedPlace struct {
	place.Slotted
	layout int
}

func (m movedPlace) Layout() int { return m.layout }

// Issue 39 #10: GraphExec.Close held the exec's lock across its wait at a
// Reshape's gate, and a launch from inside a Do (which the Reshape waits
// for) took the exec's lock before the life lock: the three waited for
// each other. Both take the life lock first now.
func TestGraphExecCloseReshapeAndALaunchInADo(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16))
	require.NoError(t, err)
	fn := spinKernel(t, a)
	ctx := context.Background()
	var args Args
	args.Uint64(0)
	s := a.Stream()
	g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args) })
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Close())

	inDo, launch := make(chan struct{}), make(chan struct{})
	doDone := make(chan error, 1)
	go func() {
		doDone <- a.Do(ctx, func(Current) error {
			close(inDo)
			<-launch
			return s.LaunchGraph(ctx, x)
		})
	}()
	<-inDo
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reshaped := make(chan error, 1)
	go func() { reshaped <- a.Reshape(rctx, 16) }()
	waitForStack(t, "(*tenantCore).Reshape", "(*Engine).hold") // the gate is shut
	closed := make(chan error, 1)
	go func() { closed <- x.Close() }()
	waitForStack(t, "(*GraphExec).Close", "(*pauseGate).wait")
	close(launch)
	done := make(chan struct{})
	var doErr, reshapeErr, closeErr error
	go func() {
		doErr, reshapeErr, closeErr = <-doDone, <-reshaped, <-closed
		close(done)
	}()
	settle(t, done, cancel, "GraphExec.Close, Reshape and a Do launching the graph")
	require.NoError(t, doErr, "the launch in the Do came before the Reshape")
	require.NoError(t, reshapeErr)
	require.NoError(t, closeErr)
	require.ErrorIs(t, s.LaunchGraph(ctx, x), ErrClosed)
}

// Issue 39 #8: DoEach's runs each held their context until all had run,
// so runs that came to the life lock after a Reshape's pause waited at its
// gate while the pause waited for the runs that held contexts. A GPU share
// spaces the runs' admissions, so the pause falls between them.
func TestDoEachRacingReshape(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16), WithConcurrentDos(2), WithGPUShare(0.5), WithTenantRefillPeriod(20*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for i := range rounds {
		first := make(chan struct{})
		var once sync.Once
		eachErr, reshaped := make(chan error, 1), make(chan error, 1)
		go func() {
			eachErr <- a.DoEach(ctx, func(Current) error { once.Do(func() { close(first) }); return nil })
		}()
		go func() {
			<-first // one run holds its context, waiting for the other
			reshaped <- a.Reshape(ctx, []int{16, 8}[i%2])
		}()
		done := make(chan struct{})
		var e1, e2 error
		go func() { e1, e2 = <-eachErr, <-reshaped; close(done) }()
		settle(t, done, cancel, "DoEach racing Reshape")
		require.NoError(t, e1)
		require.NoError(t, e2)
	}
}

// Issue 39 #9: two DoEach calls on one tenant at once (two libraries warmed
// in parallel) each held part of the contexts and waited for the rest.
// One runs after the other now.
func TestTwoDoEachAtOnce(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16), WithConcurrentDos(4))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for range rounds {
		// A Do holds one context while both DoEach calls start, so both
		// are waiting for it when it comes free.
		inDo, endDo := make(chan struct{}), make(chan struct{})
		doDone := make(chan error, 1)
		go func() { doDone <- a.Do(ctx, func(Current) error { close(inDo); <-endDo; return nil }) }()
		<-inDo
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j := range errs {
			wg.Go(func() { errs[j] = a.DoEach(ctx, func(Current) error { return nil }) })
		}
		waitForStack(t, "(*tenantCore).DoEach")
		close(endDo)
		require.NoError(t, <-doDone)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		settle(t, done, cancel, "two DoEach calls at once")
		require.NoError(t, errors.Join(errs...))
	}
}

// Issue 39 #11: a panic in DoEach's function killed the process even when
// the caller recovered (the runs' goroutines re-raised it with no
// recover). As in Do, the panic goes on in the caller, and the tenant's
// contexts are free again after it.
func TestDoEachPanicGoesOnInTheCaller(t *testing.T) {
	p, _ := openSim(t)
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{{"partitioned", []TenantOption{WithSMs(16), WithConcurrentDos(3)}}, {"unpartitioned", nil}} {
		a, err := p.NewTenant(tc.name, tc.opts...)
		require.NoError(t, err)
		ctx := context.Background()
		var got any
		func() {
			defer func() { got = recover() }()
			_ = a.DoEach(ctx, func(Current) error { panic("boom") })
		}()
		require.Equal(t, "boom", got, tc.name)
		runs := 0
		var mu sync.Mutex
		require.NoError(t, a.DoEach(ctx, func(Current) error { mu.Lock(); runs++; mu.Unlock(); return nil }), "every context free again")
		require.Equal(t, place.Dos(a.c.place.Placement), runs)
		require.NoError(t, a.Close())
	}
}
