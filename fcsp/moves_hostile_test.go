package fcsp

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// The hostile round of issue 52: moves of SMs beside calls that cross
// tenants (a Do's f may call other tenants), contexts that end mid-move,
// and the latency class's life. Each test failed (hung, or answered
// wrong) before the moves got their engine (internal/smmove) and its
// protocol (docs/LOCKS.md, "The move protocol").

// crossDo runs, until stop, a Do of from whose f sleeps a little and then
// calls into to (an allocation and a free, counted in to's life lock), so
// that from's Dos are in flight, and call to, whenever a move comes.
func crossDo(t *testing.T, from, to *Tenant) (stop func()) {
	return sync.OnceFunc(doLoop(4, func() {
		err := from.Do(context.Background(), func(Current) error {
			time.Sleep(300 * time.Microsecond)
			p, err := to.Alloc(context.Background(), 4096)
			if err != nil {
				return err
			}
			return to.Free(p)
		})
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("cross-tenant Do: %v", err)
		}
	}))
}

// 1. A partition shrinking while a plain tenant's Do calls into it: the
// shrink held the partition's gate while the commons' move waited for
// the plain Do, which waited at that gate.
func TestShrinkBesideAPlainDoCallingThePartition(t *testing.T) {
	p, _ := openSim(t)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	part, err := p.NewTenant("part", WithSMs(16), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	stop := crossDo(t, plain, part)
	defer stop()
	for range 40 {
		for _, sms := range []int{32, 16} {
			require.NoError(t, within10s(t, "Reshape", func() error { return part.Reshape(context.Background(), sms) }))
			require.Equal(t, sms, part.SMs())
			require.Equal(t, 132-sms, plain.SMs())
		}
	}
}

// 2. The latency class closed from inside a plain tenant's Do while the
// controller moves its SMs: the Close waited for the controller, whose
// move (of the commons, which shares the rest's SMs) waited for that Do.
// The Do closes the class once a move holds its tenant's calls back.
func TestLatencyClassClosedFromInsideAPlainDoMidMove(t *testing.T) {
	for range 3 {
		p, _ := openSim(t)
		plain, err := p.NewTenant("plain")
		require.NoError(t, err)
		lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
		require.NoError(t, err)
		rest, err := p.NewTenant("batch", WithRestOfSMs())
		require.NoError(t, err)
		burst := doLoop(16, func() {
			err := lat.Do(context.Background(), func(Current) error { time.Sleep(200 * time.Microsecond); return nil })
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("lat Do: %v", err)
			}
		})
		require.NoError(t, within10s(t, "Close from inside a plain Do", func() error {
			return plain.Do(context.Background(), func(Current) error {
				for end := time.Now().Add(5 * time.Second); !plain.c.life.Paused() && time.Now().Before(end); {
					time.Sleep(20 * time.Microsecond)
				}
				return lat.Close()
			})
		}))
		burst()
		// The controller's last trade is undone (the rest takes back what
		// it gave) once the Do is over; nothing is lost, and the plain
		// tenant runs on the SMs no partition holds, or shares the rest's
		// until the next change moves it.
		require.Eventually(t, func() bool {
			return p.Stats().FreeSMs == 132-rest.SMs() && slices.Contains([]int{132 - rest.SMs(), rest.SMs()}, plain.SMs())
		}, 5*time.Second, time.Millisecond)
	}
}

// 3. A plain tenant's warm-up that calls another plain tenant's Do, run
// again after a move of the commons: the move ran it with the other
// tenant's calls held back and the placement lock held, and every later
// NewTenant, Close and Pool.Close hung.
func TestRewarmCallingAnotherPlainTenant(t *testing.T) {
	p, _ := openSim(t)
	other, err := p.NewTenant("other")
	require.NoError(t, err)
	var ran atomic.Int32
	_, err = p.NewTenant("warm", WithWarmup(func(Current) error {
		ran.Add(1)
		return other.Do(context.Background(), func(Current) error { return nil })
	}))
	require.NoError(t, err)
	before := ran.Load()
	require.NoError(t, within10s(t, "NewTenant moving the commons", func() error {
		_, err := p.NewTenant("part", WithSMs(16))
		return err
	}))
	require.NoError(t, within10s(t, "the next NewTenant", func() error {
		_, err := p.NewTenant("part2", WithSMs(16))
		return err
	}))
	require.Eventually(t, func() bool { return ran.Load() > before }, 5*time.Second, time.Millisecond, "rewarmed after the move")
	require.NoError(t, within10s(t, "Pool.Close", p.Close))
}

// 4. Several plain tenants' DoEach at once: each run holds its context
// until all of its DoEach have run, and the commons' contexts are shared
// by its tenants, so two DoEach could each hold part of them and wait for
// the rest. Here another plain tenant's Dos hold all but four of the
// commons' 64 contexts while eight DoEach (16 runs each) queue for them,
// then let them go: served in arrival order, the DoEach share them out.
func TestPlainTenantsDoEachAtOnce(t *testing.T) {
	p, _ := openSim(t)
	// Kept: a partition dropped here is closed when the collector finds
	// it, and the commons moves onto its SMs, holding the plain tenants'
	// new calls until their calls in flight leave, which here wait for
	// all sixty to have come in (a -race -count=20 run hung so).
	part, err := p.NewTenant("part", WithSMs(16))
	require.NoError(t, err)
	defer runtime.KeepAlive(part)
	holder, err := p.NewTenant("holder")
	require.NoError(t, err)
	var plains []*Tenant
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		tn, err := p.NewTenant(n)
		require.NoError(t, err)
		plains = append(plains, tn)
	}
	// Many threads, so that the DoEach' runs queue interleaved.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(64))
	for range 3 {
		release := make(chan struct{})
		var held, holders sync.WaitGroup
		held.Add(60)
		for range 60 {
			holders.Go(func() {
				_ = holder.Do(context.Background(), func(Current) error { held.Done(); <-release; return nil })
			})
		}
		held.Wait()
		var wg sync.WaitGroup
		errs := make(chan error, len(plains))
		for _, tn := range plains {
			wg.Go(func() {
				errs <- tn.DoEach(context.Background(), func(Current) error { time.Sleep(100 * time.Microsecond); return nil })
			})
		}
		time.Sleep(20 * time.Millisecond) // every run queued
		close(release)
		holders.Wait()
		require.NoError(t, within10s(t, "DoEach of every plain tenant at once", func() error { wg.Wait(); return nil }))
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
}

// 5. A growing Reshape's move of the commons honours its ctx: with a
// plain tenant's Do in flight for seconds, a 50 ms deadline ends it at
// 50 ms, nothing changed (it returned nil after 2 s, grown).
func TestGrowthMovingTheCommonsHonoursItsContext(t *testing.T) {
	p, _ := openSim(t)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	part, err := p.NewTenant("part", WithSMs(16), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	in, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- plain.Do(context.Background(), func(Current) error { close(in); <-release; return nil })
	}()
	<-in
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = part.Reshape(ctx, 32)
	took := time.Since(start)
	close(release)
	require.NoError(t, <-done)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, took, time.Second, "the move waited past its deadline")
	require.Equal(t, 16, part.SMs(), "nothing changed")
	require.Equal(t, 116, plain.SMs())
	require.Equal(t, 116, p.Stats().FreeSMs)
	// And it grows once the Do is done.
	require.NoError(t, part.Reshape(context.Background(), 32))
	require.Equal(t, 100, plain.SMs())
}

// 6. A rest tenant made while the latency class holds more than its
// floor: its sizes were built from the class's size then, every later
// shrink was refused, and the idle class kept its SMs for good. (Issue
// 55 item 3: a class reshaped by hand before its rest exists.)
func TestRestMadeWhileTheLatencyClassIsAboveItsFloor(t *testing.T) {
	p, _ := openSim(t)
	lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
	require.NoError(t, err)
	require.NoError(t, lat.Reshape(context.Background(), 32))
	rest, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	require.Equal(t, []int{84, 92, 100, 108, 116}, rest.Stats().ReshapeSizes, "the rest's sizes follow the class's floor")
	require.Eventually(t, func() bool { return lat.SMs() == 16 && rest.SMs() == 116 }, 5*time.Second, time.Millisecond,
		"the idle class is back on its floor")
	// The controller owns both now: a Reshape by hand is refused.
	require.ErrorIs(t, lat.Reshape(context.Background(), 24), ErrInvalidArgument)
	require.ErrorIs(t, rest.Reshape(context.Background(), 100), ErrInvalidArgument)
	// A burst still grows the class: the rest gives what it was built to.
	stop := burstOf(t, lat)
	require.Eventually(t, func() bool { return lat.SMs() == 48 }, 5*time.Second, time.Millisecond)
	require.Equal(t, 84, rest.SMs())
	stop()
}

// 7. Each latency class reports its own moves: a new class does not
// inherit the last one's counts, and a closed class's Stats keep them.
func TestLatencyClassMovesAreItsOwn(t *testing.T) {
	p, _ := openSim(t)
	lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
	require.NoError(t, err)
	batch, err := p.NewTenant("batch", WithRestOfSMs()) // kept: a collected handle is closed
	require.NoError(t, err)
	defer runtime.KeepAlive(batch)
	stop := burstOf(t, lat)
	require.Eventually(t, func() bool { return lat.Stats().SMMoves > 0 }, 5*time.Second, time.Millisecond)
	stop()
	require.NoError(t, lat.Close())
	st := lat.Stats()
	require.True(t, st.Closed)
	require.NotZero(t, st.SMMoves, "a closed class keeps its counts")
	require.Equal(t, 300*time.Microsecond, st.LatencyTarget)
	next, err := p.NewTenant("interactive2", WithLatencyTarget(400*time.Microsecond, 16, 48))
	require.NoError(t, err)
	ns := next.Stats()
	require.Zero(t, ns.SMMoves, "a new class starts with none")
	require.Zero(t, ns.SMMovesBy)
	require.Empty(t, ns.SMMoveReason)
	require.Equal(t, 400*time.Microsecond, ns.LatencyTarget)
}

// 8. A failed warm-up's error names the tenant and the call once.
func TestWarmupErrorNamesTheTenantOnce(t *testing.T) {
	p, _ := openSim(t)
	_, err := p.NewTenant("w", WithSMs(16), WithWarmup(func(Current) error { return errors.New("boom") }))
	require.ErrorIs(t, err, ErrWarmupFailed)
	require.Equal(t, 1, strings.Count(err.Error(), `tenant "w"`), err.Error())
	require.Equal(t, 1, strings.Count(err.Error(), "NewTenant"), err.Error())
}

// Two pools on one device of the process: each would hand out SMs from a
// split of its own, and a partition of one would share SMs with a
// partition of the other. The second Open is refused, saying how to
// share the first; once the first is closed the device opens again.
func TestSecondPoolOnADeviceIsRefused(t *testing.T) {
	f := fake.New(fake.H200())
	fake.RegisterKernels(f)
	same := withDriver(func() cuda.Driver { return f }, true)
	first, err := Open(context.Background(), 0, same)
	require.NoError(t, err)
	_, err = Open(context.Background(), 0, same)
	require.ErrorIs(t, err, ErrDeviceInUse)
	require.Contains(t, err.Error(), "share")
	// Another device of the same driver is another SM map.
	require.NoError(t, first.Close())
	again, err := Open(context.Background(), 0, same)
	require.NoError(t, err)
	a, err := again.NewTenant("a", WithSMs(64))
	require.NoError(t, err)
	require.Len(t, smsOf(t, a, a.Stream()), 64)
	require.NoError(t, again.Close())
}
