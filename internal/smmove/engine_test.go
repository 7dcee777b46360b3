package smmove

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/life"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// The engine's own tests: its members are fakes (a life lock, the threads
// inside its "Dos", its streams' handles), its placements the simulated
// H200's partitions and commons, and no fcsp in sight.

func init() { lockorder.Enable(func(msg string) { panic(msg) }) }

// fakeMember is a tenant as the engine sees it.
type fakeMember struct {
	name    string
	pl      place.Placement
	calls   life.Lock
	dos     inside.Threads
	mu      sync.Mutex
	streams []cuda.Stream // its streams' handles, swapped by the engine
	sms     atomic.Int64  // what Resized said last
	rewarms atomic.Int64
	rewarm  func()       // the warm-up, run by Rewarm (nil: none)
	horizon atomic.Int64 // what QueueBound said last
}

func (m *fakeMember) Name() string           { return m.name }
func (m *fakeMember) Place() place.Placement { return m.pl }
func (m *fakeMember) Calls() *life.Lock      { return &m.calls }
func (m *fakeMember) Dos() *inside.Threads   { return &m.dos }
func (m *fakeMember) Resized(sms int) error  { m.sms.Store(int64(sms)); return nil }
func (m *fakeMember) QueueBound(d time.Duration) error {
	m.horizon.Store(int64(d))
	return nil
}
func (m *fakeMember) Rewarm() {
	m.rewarms.Add(1)
	if m.rewarm != nil {
		m.rewarm()
	}
}

func (m *fakeMember) Swapper() func(old, new cuda.Stream) {
	return func(old, new cuda.Stream) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, h := range m.streams {
			if h == old {
				m.streams[i] = new
			}
		}
	}
}

// stream is the member's first stream now.
func (m *fakeMember) stream() cuda.Stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.streams[0]
}

// call runs f counted in the member's life lock, as a tenant's call is
// (a call from inside one of its own "Dos" passes its gate).
func (m *fakeMember) call(f func()) bool {
	slot, ok := m.calls.Enter(m.dos.Pinned)
	if !ok {
		return false
	}
	defer m.calls.Exit(slot)
	f()
	return true
}

// do is a Do: a call, on a locked thread named among the member's Dos.
func (m *fakeMember) do(f func()) bool {
	return m.call(func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t := osthread.ID()
		s := m.dos.Enter(t)
		defer m.dos.Exit(s, t)
		f()
	})
}

// rig is an engine on a simulated H200 split by 8.
type rig struct {
	drv   *fake.Driver
	dev   *smpart.Device
	split *smpart.Split
	e     *Engine
}

func newRig(t *testing.T) *rig {
	t.Helper()
	drv := fake.New(fake.H200())
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	split, err := dev.Split(8)
	require.NoError(t, err)
	e, err := New(Config{Dev: dev, Split: split})
	require.NoError(t, err)
	r := &rig{drv: drv, dev: dev, split: split, e: e}
	t.Cleanup(func() {
		require.NoError(t, e.Close())
		require.NoError(t, dev.Close())
	})
	return r
}

// plain joins an unpartitioned member (the commons) with one stream.
func (r *rig) plain(t *testing.T, name string) *fakeMember {
	t.Helper()
	m := &fakeMember{name: name, pl: r.e.Plain()}
	require.NoError(t, r.e.Change(context.Background(), func() error { return r.e.Follow(true) }))
	h, _, err := m.pl.NewStream(true)
	require.NoError(t, err)
	m.streams = []cuda.Stream{h}
	r.e.Join(m, Role{})
	t.Cleanup(func() { r.e.Leave(m); _ = m.pl.DestroyStream(m.stream(), false); r.e.Gone(m) })
	return m
}

// part joins a reshapable partition of initial SMs (sizes), made as
// NewTenant makes one: listed, then the commons follows.
func (r *rig) part(t *testing.T, name string, initial int, sizes ...int) *fakeMember {
	t.Helper()
	var m *fakeMember
	require.NoError(t, r.e.Change(context.Background(), func() error {
		p, err := r.split.TakeLayouts(initial, sizes, 0)
		if err != nil {
			return err
		}
		m = &fakeMember{name: name, pl: place.NewGreen(p), streams: []cuda.Stream{p.Stream()}}
		r.e.Join(m, Role{})
		return nil
	}))
	require.NoError(t, r.e.FollowNow(context.Background()))
	t.Cleanup(func() { r.e.Leave(m); _ = place.Close(m.pl); r.e.Released() })
	return m
}

// sms lists the SMs work on the member's first stream runs on (the fake
// says which SMs a stream's context holds).
func (r *rig) sms(t *testing.T, m *fakeMember) []int {
	t.Helper()
	return r.drv.StreamSMs(m.stream())
}

// The commons follows a partition's Reshape both ways: a growth moves the
// plain member off its new SMs before it switches, a shrink moves it onto
// what the partition gave after; the plain member's stream handle is
// swapped, its SMs resized, its warm-up run again once the move is over,
// and its work never lands on the partition's SMs.
func TestCommonsFollowsAReshape(t *testing.T) {
	r := newRig(t)
	plain := r.plain(t, "plain")
	part := r.part(t, "part", 16, 16, 32)
	require.Equal(t, 116, plain.pl.SMs())
	require.Empty(t, overlap(r.sms(t, plain), r.sms(t, part)))
	for _, n := range []int{32, 16, 32} {
		before := plain.stream()
		rewarms := plain.rewarms.Load()
		require.NoError(t, r.e.Reshape(context.Background(), part, n))
		require.Equal(t, n, part.pl.SMs())
		require.Equal(t, 132-n, plain.pl.SMs())
		require.Equal(t, int64(132-n), plain.sms.Load(), "resized")
		require.NotEqual(t, before, plain.stream(), "its stream moved to the new layout")
		require.Greater(t, plain.rewarms.Load(), rewarms, "warmed again after the move")
		require.Empty(t, overlap(r.sms(t, plain), r.sms(t, part)))
		require.Len(t, r.sms(t, part), n)
	}
}

// A move waits for the calls of the tenants it holds, and for nothing
// else; its ctx ends the wait, nothing changed.
func TestAMoveWaitsForTheCallsItHolds(t *testing.T) {
	r := newRig(t)
	plain := r.plain(t, "plain")
	other := r.part(t, "other", 16)
	part := r.part(t, "part", 16, 16, 32)
	in, out := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(out) })
	defer release() // a failed check still ends the call before the cleanup
	done := make(chan bool, 1)
	go func() { done <- plain.call(func() { close(in); <-out }) }()
	<-in
	// A call of another tenant, in flight for good, is not waited for: a
	// shrink holds the partition alone, then the commons.
	hold := make(chan struct{})
	defer close(hold)
	go other.call(func() { <-hold })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, r.e.Reshape(ctx, part, 32), context.DeadlineExceeded, "the commons' move waits for the plain call")
	require.Equal(t, 16, part.pl.SMs(), "nothing changed")
	require.Equal(t, 132-16-16, plain.pl.SMs(), "the commons where it was")
	require.Equal(t, 132-16-16, r.split.FreeSMs(), "the claim given back")
	release()
	require.True(t, <-done)
	require.NoError(t, r.e.Reshape(context.Background(), part, 32))
	require.Equal(t, 132-16-32, plain.pl.SMs())
}

// Rule 3: a call from inside a Do of a held tenant passes the gates the
// move holds, another tenant's included; a call from elsewhere waits.
func TestACallFromInsideAHeldDoPasses(t *testing.T) {
	r := newRig(t)
	a := r.plain(t, "a")
	b := r.plain(t, "b")
	_ = r.part(t, "part", 16)
	// Let the commons move: a partition made needs none now; make a
	// second and follow, holding a and b.
	var passed atomic.Bool
	in := make(chan struct{})
	go a.do(func() {
		close(in)
		for !b.calls.Paused() {
			runtime.Gosched()
		}
		passed.Store(b.call(func() {})) // b is held by the move, which waits for this Do
	})
	<-in
	require.NoError(t, r.e.Change(context.Background(), func() error {
		p, err := r.split.Take(16)
		if err != nil {
			return err
		}
		m := &fakeMember{name: "p2", pl: place.NewGreen(p), streams: []cuda.Stream{p.Stream()}}
		r.e.Join(m, Role{})
		t.Cleanup(func() { r.e.Leave(m); _ = p.Close() })
		return nil
	}))
	require.NoError(t, r.e.FollowNow(context.Background()))
	require.True(t, passed.Load())
	require.Equal(t, 132-32, a.pl.SMs())
}

// Rule 4: a caller waiting for the move lock from inside a Do the move
// waits for makes the move give way, and the move starts its step again
// after it.
func TestAMoveGivesWayToAWaiterInsideItsDo(t *testing.T) {
	r := newRig(t)
	plain := r.plain(t, "plain")
	part := r.part(t, "part", 16, 16, 32)
	var inner error
	in, got := make(chan struct{}), make(chan struct{})
	go plain.do(func() {
		close(in)
		for !plain.calls.Paused() { // the growth's move of the commons holds plain
			runtime.Gosched()
		}
		inner = r.e.Change(context.Background(), func() error { return nil }) // waits for the move lock
		close(got)
	})
	<-in
	require.NoError(t, r.e.Reshape(context.Background(), part, 32))
	<-got
	require.NoError(t, inner)
	require.Equal(t, 32, part.pl.SMs())
	require.Equal(t, 100, plain.pl.SMs())
}

// Rule 7: from inside a Do of a tenant it would hold, a move is refused
// rather than waiting for itself; a follow after a partition closed is
// left to the next change.
func TestAMoveFromInsideAHeldDoIsRefused(t *testing.T) {
	r := newRig(t)
	plain := r.plain(t, "plain")
	part := r.part(t, "part", 16, 16, 32)
	var err error
	plain.do(func() { err = r.e.Reshape(context.Background(), part, 32) })
	require.ErrorIs(t, err, errs.ErrInsideDo)
	require.Equal(t, 16, part.pl.SMs())
	require.Equal(t, 116, r.split.FreeSMs(), "the claim given back")
}

// The controller grows the latency class as its requests come, from the
// rest, and gives the SMs back a hold after they stop; each move is
// counted in the class, and the class's record outlives the controller.
func TestControllerFollowsTheLoad(t *testing.T) {
	r := newRig(t)
	class := &Class{Min: 16, Max: 48, Target: 2 * time.Millisecond}
	sizes, err := r.e.LatencySizes("lat", 16, 48)
	require.NoError(t, err)
	lat := r.part(t, "lat", 16, sizes...)
	r.e.mu.Lock()
	r.e.lat, r.e.latM = class, lat // as Join would have: the test's part joined plainly
	r.e.mu.Unlock()
	restSizes := r.e.RestSizes(r.split.FreeSMs())
	require.Equal(t, []int{116, 108, 100, 92, 84}, restSizes)
	var rest *fakeMember
	require.NoError(t, r.e.Change(context.Background(), func() error {
		p, err := r.split.TakeRestLayouts(restSizes)
		if err != nil {
			return err
		}
		rest = &fakeMember{name: "rest", pl: place.NewGreen(p), streams: []cuda.Stream{p.Stream()}}
		r.e.Join(rest, Role{Rest: true})
		return nil
	}))
	t.Cleanup(func() { r.e.Leave(rest); _ = place.Close(rest.pl) })
	require.True(t, r.e.Steering())
	require.Equal(t, int64(DefaultHorizon), rest.horizon.Load(), "the rest's queue bounded while the class may take its SMs")
	// A burst: 16 requests in flight (each a Do with its time logged).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := class.Begin()
				lat.do(func() { time.Sleep(200 * time.Microsecond) })
				class.End(start, true)
			}
		})
	}
	require.Eventually(t, func() bool { return lat.pl.SMs() == 48 }, 5*time.Second, time.Millisecond)
	require.Equal(t, 84, rest.pl.SMs())
	require.Eventually(t, func() bool { _, rec := class.Times(); return rec.Count > 0 }, 5*time.Second, time.Millisecond,
		"the burst's P99 back within target, its recovery timed")
	close(stop)
	wg.Wait()
	require.Eventually(t, func() bool { return lat.pl.SMs() == 16 && rest.pl.SMs() == 116 }, 5*time.Second, time.Millisecond)
	r.e.Leave(lat)
	require.False(t, r.e.Steering(), "the controller stops with its class")
	require.Zero(t, rest.horizon.Load(), "and the rest's queue is free again")
	mt, rec := class.Times()
	moves, by, reason, target := class.Stats()
	require.Equal(t, moves, mt.Count, "each move timed")
	require.Positive(t, rec.Count)
	require.LessOrEqual(t, rec.Le[len(rec.Le)-1], rec.Count)
	require.GreaterOrEqual(t, moves, uint64(2))
	require.Equal(t, uint64(1), by.Shrink)
	require.Contains(t, reason, "shrink: ")
	require.Equal(t, 2*time.Millisecond, target)
}

// A Reshape by hand of a tenant the controller moves is refused.
func TestASteeredTenantIsNotReshapedByHand(t *testing.T) {
	r := newRig(t)
	class := &Class{Min: 16, Max: 32, Target: time.Millisecond}
	sizes, err := r.e.LatencySizes("lat", 16, 32)
	require.NoError(t, err)
	var lat, rest *fakeMember
	require.NoError(t, r.e.Change(context.Background(), func() error {
		p, err := r.split.TakeLayouts(16, sizes, 0)
		if err != nil {
			return err
		}
		lat = &fakeMember{name: "lat", pl: place.NewGreen(p), streams: []cuda.Stream{p.Stream()}}
		r.e.Join(lat, Role{Latency: class})
		q, err := r.split.TakeRestLayouts(r.e.RestSizes(r.split.FreeSMs()))
		if err != nil {
			return err
		}
		rest = &fakeMember{name: "rest", pl: place.NewGreen(q), streams: []cuda.Stream{q.Stream()}}
		r.e.Join(rest, Role{Rest: true})
		return nil
	}))
	t.Cleanup(func() { r.e.Leave(rest); r.e.Leave(lat); _ = place.Close(rest.pl); _ = place.Close(lat.pl) })
	require.ErrorIs(t, r.e.Reshape(context.Background(), lat, 24), errs.ErrInvalidArgument)
	require.ErrorIs(t, r.e.Reshape(context.Background(), rest, 108), errs.ErrInvalidArgument)
	_, err = r.e.LatencySizes("another", 8, 16)
	require.ErrorIs(t, err, errs.ErrInvalidArgument, "one latency class per pool")
}

// The controller's requests in flight are the most seen over its last
// steerPeak samples: a burst read low at one instant still asks for its
// size, and a burst that ended is forgotten steerPeak samples later.
func TestSteerPeakInFlight(t *testing.T) {
	var p peak
	got, rose := []int{}, []bool{}
	for _, n := range []int{1, 16, 9, 3, 11, 0, 0, 0, 0, 1} {
		most, rising := p.add(n)
		got, rose = append(got, most), append(rose, rising)
	}
	require.Equal(t, []int{1, 16, 16, 16, 16, 11, 11, 11, 0, 1}, got)
	require.Equal(t, []bool{true, true, false, false, true, false, false, false, false, true}, rose, "over the sample before")
}

// The controller's P99 is of the requests that started since its window
// opened or the last move ended, whichever is later: a slow request of
// the size before a move is not read as the new size's.
func TestLatencyTailSinceTheMove(t *testing.T) {
	var l Log
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for i := range 10 {
		l.add(at(i), 900*time.Microsecond) // before the move: slow
	}
	for i := range 90 {
		l.add(at(10).Add(time.Duration(i)*time.Microsecond), 100*time.Microsecond)
	}
	r := l.tail(at(0), 300*time.Microsecond)
	// Their load: 18 ms of requests over the 10.189 ms from the first's
	// start to the last's end.
	require.InDelta(t, 18.0/10.189, r.load, 1e-9)
	r.load = 0
	require.Equal(t, recent{p99: 900 * time.Microsecond, slow: 10, spread: 9 * time.Millisecond, n: 100}, r,
		"the slow ones started 0 to 9 ms in")
	r = l.tail(later(at(-20), at(10)), 300*time.Microsecond)
	require.InDelta(t, 9.0/0.189, r.load, 1e-9, "90 requests of 100 µs over 189 µs")
	r.load = 0
	require.Equal(t, recent{p99: 100 * time.Microsecond, n: 90}, r, "only those that started after the move ended")
	r = l.tail(at(20), 300*time.Microsecond)
	require.Equal(t, recent{}, r, "none: no P99")
}

// A request that moves between its Do and its Synchronize while the Dos
// are counted is one request, not two (InFlight); two requests, one in
// each, are two.
func TestInFlightCountsARequestBetweenItsCallsOnce(t *testing.T) {
	var l Log
	toSync := countFunc(func() int { l.waiting.Add(1); return 1 }) // its Do counted, then its Synchronize begins
	require.Equal(t, 1, InFlight(toSync, &l))
	toDo := countFunc(func() int { l.waiting.Add(-1); return 1 }) // its Synchronize ends, its next Do is counted
	require.Equal(t, 1, InFlight(toDo, &l))
	l.waiting.Store(1)
	require.Equal(t, 2, InFlight(countFunc(func() int { return 1 }), &l))
}

// countFunc counts what f says.
type countFunc func() int

func (f countFunc) Count() int { return f() }

func overlap(a, b []int) []int {
	var out []int
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// The growth is chosen once, by New, from the link-time variable (the
// A/B's storm-atonce is built with -X ...smmove.growth=at-once); anything
// but GrowAtOnce drains, as the default does.
func TestGrowthChosenAtLinkTime(t *testing.T) {
	defer func(was string) { growth = was }(growth)
	for _, c := range []struct {
		v      string
		atOnce bool
	}{{GrowDrained, false}, {GrowAtOnce, true}, {"", false}, {"at once", false}} {
		growth = c.v
		require.Equal(t, c.atOnce, newRig(t).e.atOnce, "growth=%q", c.v)
	}
}
