package fcsp

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smmove"
)

// Issue 41 on the simulator: a latency class beside a rest tenant grows
// within its bounds when a burst of requests is in flight, taking the SMs
// from the rest, and gives them back, one step a hold, once idle; never
// below its floor. Every move is counted with its reason.
func TestLatencyClassFollowsItsLoad(t *testing.T) {
	p, _ := openSim(t)
	lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
	require.NoError(t, err)
	require.Equal(t, 16, lat.SMs())
	require.Equal(t, []int{16, 24, 32, 40, 48}, lat.Stats().ReshapeSizes)
	rest, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	require.Equal(t, 116, rest.SMs())
	require.Equal(t, []int{84, 92, 100, 108, 116}, rest.Stats().ReshapeSizes)
	_, err = p.NewTenant("another", WithLatencyTarget(time.Millisecond, 8, 16))
	require.ErrorIs(t, err, ErrInvalidArgument, "one latency class per pool")

	// A burst: 16 goroutines with a request in flight each, back to back
	// (a Reshape waits for the requests in flight, so they must end).
	stop := burstOf(t, lat)
	// The move is counted after its Reshapes: wait for the count too.
	require.Eventually(t, func() bool { return lat.SMs() == 48 && lat.Stats().SMMoves > 0 }, 5*time.Second, time.Millisecond, "the burst grows the class to its most")
	require.Equal(t, 132-48, rest.SMs(), "taken from the rest")
	st := lat.Stats()
	require.NotZero(t, st.SMMoves)
	require.Contains(t, st.SMMoveReason, "grow: ")
	stop()
	// Idle: back to the floor, one step a hold, never below it. (A
	// shrink reshapes the class, then the rest: both are waited for.)
	// The move is recorded after both Reshapes: wait for its reason too.
	require.Eventually(t, func() bool {
		return lat.SMs() == 16 && rest.SMs() == 116 && strings.Contains(lat.Stats().SMMoveReason, "shrink: ")
	}, 5*time.Second, time.Millisecond, "back to the floor, by a shrink")
	time.Sleep(3 * smmove.SteerHold)
	require.Equal(t, 16, lat.SMs(), "never below the floor")
	require.NoError(t, rest.Close()) // the controller stops with its tenant
	require.Equal(t, 16, lat.SMs())
}

// DoEach warms every size a reshapable tenant may take: a later Reshape
// and the Dos after it make no green context.
func TestDoEachWarmsEverySize(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16, 24), WithConcurrentDos(3))
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[cuda.Context]bool{}
	sizes := map[int]int{}
	require.NoError(t, a.DoEach(context.Background(), func(cur Current) error {
		mu.Lock()
		seen[cur.in.Cur] = true
		sizes[cur.SMs()]++
		mu.Unlock()
		return nil
	}))
	require.Len(t, seen, 9, "3 contexts in each of 3 sizes")
	require.Equal(t, map[int]int{8: 3, 16: 3, 24: 3}, sizes, "each run told its own size (cublasSetSmCountTarget)")
	made := drv.Calls("cuGreenCtxCreate")
	for _, n := range []int{16, 24, 8} {
		require.NoError(t, a.Reshape(context.Background(), n))
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				require.NoError(t, a.Do(context.Background(), func(Current) error { time.Sleep(time.Millisecond); return nil }))
			})
		}
		wg.Wait()
	}
	require.Equal(t, made, drv.Calls("cuGreenCtxCreate"), "a context made on a request's path")
}

// Every move is counted by the rule that made it (Stats.SMMovesBy, what
// fcspprom exports) and logged at debug level with the two tenants' SMs
// and the reason; the latency class's Stats say its target.
func TestSMMovesSayWhy(t *testing.T) {
	var buf bytes.Buffer
	p, _ := openSim(t, WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
	require.NoError(t, err)
	rest, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	stop := burstOf(t, lat)
	require.Eventually(t, func() bool { return lat.SMs() == 48 }, 5*time.Second, time.Millisecond)
	stop()
	// The move is counted after its Reshapes: wait for the count, not
	// only the SMs.
	require.Eventually(t, func() bool { return lat.SMs() == 16 && lat.Stats().SMMovesBy.Shrink > 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, rest.Close()) // the controller stops: the log is still
	st := lat.Stats()
	by := st.SMMovesBy
	require.Equal(t, 300*time.Microsecond, st.LatencyTarget)
	require.NotZero(t, by.GrowLoad+by.GrowP99)
	require.Equal(t, uint64(1), by.Shrink, "48 to 16 in one move, a hold after the burst")
	require.Equal(t, st.SMMoves, by.GrowLoad+by.GrowP99+by.Shrink+by.Trim)
	var moved []string
	for l := range strings.SplitSeq(buf.String(), "\n") {
		if strings.Contains(l, `msg="SMs moved"`) {
			moved = append(moved, l)
		}
	}
	require.Len(t, moved, int(st.SMMoves), buf.String())
	require.Contains(t, moved[len(moved)-1], "tenant=interactive from_sms=48 sms=16 rest=batch rest_sms=116 kind=shrink reason=\"shrink: ")
	require.Contains(t, moved[0], "tenant=interactive from_sms=16 ")
	require.Contains(t, moved[0], " kind=grow_")
}

// doLoop runs body in n goroutines, each back to back, until the stop it
// returns is called; stop waits for them (a Reshape waits for the calls in
// flight, so a burst's must end before its test does).
func doLoop(n int, body func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				body()
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// burstOf is a burst on lat: 16 goroutines with a request (a 200 µs Do)
// in flight each, back to back, until stop (which may be called again).
func burstOf(t *testing.T, lat *Tenant) (stop func()) {
	return sync.OnceFunc(doLoop(16, func() {
		require.NoError(t, lat.Do(context.Background(), func(Current) error { time.Sleep(200 * time.Microsecond); return nil }))
	}))
}

// A full load whose P99 stays well within target is given fewer SMs than
// its most, a step a hold (the trim rule), never below its floor, and each
// trim is counted: the throughput class keeps what the target does not
// need.
func TestLatencyClassTrimsWhatItsTargetDoesNotNeed(t *testing.T) {
	p, _ := openSim(t)
	lat, err := p.NewTenant("interactive", WithLatencyTarget(50*time.Millisecond, 16, 48))
	require.NoError(t, err)
	rest, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	defer rest.Close()
	var mu sync.Mutex
	seen := map[int]bool{}
	stop := sync.OnceFunc(doLoop(16, func() {
		s, err := lat.NewStream(ClassDefault)
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, lat.Do(context.Background(), func(Current) error { time.Sleep(200 * time.Microsecond); return nil }))
		require.NoError(t, s.Synchronize()) // a request's time, as the controller sees it
		mu.Lock()
		seen[lat.SMs()] = true
		mu.Unlock()
	}))
	defer stop()
	require.Eventually(t, func() bool { return lat.Stats().SMMovesBy.Trim > 0 }, 10*time.Second, time.Millisecond,
		"a full load far within target: a step given back")
	require.Eventually(t, func() bool { return lat.SMs() == 16 }, 10*time.Second, time.Millisecond, "down to the floor, a step a hold")
	stop()
	st := lat.Stats()
	require.GreaterOrEqual(t, st.SMMovesBy.Trim, uint64(1))
	require.Equal(t, st.SMMoves, st.SMMovesBy.GrowLoad+st.SMMovesBy.GrowP99+st.SMMovesBy.Shrink+st.SMMovesBy.Trim)
	mu.Lock()
	defer mu.Unlock()
	for n := range seen {
		require.GreaterOrEqual(t, n, 16, "never below the floor")
	}
}

// A latency class's requests in flight are its Dos and Synchronizes under
// way; its other calls (a scrape's Stats, an Alloc, a stream made) are
// not load. Measured on the simulator: a Launch from inside a Do counted
// twice in the life lock, so one request read as two, and a K=1 class
// grew to 24 SMs in its quiet phase.
func TestLatencyRequestsAreDosAndWaits(t *testing.T) {
	p, _ := openSim(t)
	lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
	require.NoError(t, err)
	require.Zero(t, smmove.InFlight(&lat.c.dos, &lat.c.class.Log))
	in, out, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(out) })
	defer func() { release(); <-done }() // a failed check still ends the Do before the pool closes
	go func() {
		defer close(done)
		_ = lat.Do(context.Background(), func(Current) error {
			s, err := lat.NewStream(ClassDefault) // a call from inside the Do: not a request of its own
			if err == nil {
				_ = s.Close()
			}
			close(in)
			<-out
			return err
		})
	}()
	<-in
	require.Equal(t, 1, smmove.InFlight(&lat.c.dos, &lat.c.class.Log), "one Do")
	// A server's other calls race it: the life lock counts them, the
	// requests do not.
	stop := sync.OnceFunc(doLoop(2, func() {
		_, _, _ = lat.MemGetInfo()
		if ptr, err := lat.Alloc(context.Background(), 1<<20); err == nil {
			_ = lat.Free(ptr)
		}
	}))
	defer stop()
	require.Eventually(t, func() bool { return lat.c.life.InFlight() > 1 }, 5*time.Second, time.Microsecond,
		"the calls racing the Do are in the life lock's count (what the controller read before)")
	for range 10000 {
		require.Equal(t, 1, smmove.InFlight(&lat.c.dos, &lat.c.class.Log))
	}
	stop()
	release()
	<-done
	require.Zero(t, smmove.InFlight(&lat.c.dos, &lat.c.class.Log))
	start := lat.c.class.Begin() // a Synchronize under way
	require.Equal(t, 1, smmove.InFlight(&lat.c.dos, &lat.c.class.Log))
	lat.c.class.End(start, false)
}

// A move hands SMs on only once the work the giver queued before its
// Reshape has run: the rest tenant shrinks at once, and the latency class
// grows into the SMs it gave up when that work is done, not while it still
// runs there. Measured on an H100 (run C2, 2026-12-06): moves that grew the
// class at once, onto SMs still running two queued batch GEMMs, took the
// 300 ms / 100 ms bursts' P99 from 496 to 599 µs, past the 16-SM split's.
func TestGrowthWaitsForTheRestsWorkToDrain(t *testing.T) {
	for _, bounded := range []bool{false, true} {
		p, drv := openSim(t)
		if !bounded {
			p.moves.SetHandOff(time.Minute) // the wait ends with the drain alone, however slow the host
		}
		lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
		require.NoError(t, err)
		rest, err := p.NewTenant("batch", WithRestOfSMs())
		require.NoError(t, err)
		drv.HoldEvents(true) // the work queued before a Reshape never ends
		t.Cleanup(func() { drv.HoldEvents(false) })
		stop := burstOf(t, lat)
		// (On a loaded host fewer than 16 may be in flight at the sample: the
		// first move may ask for less than 48.)
		require.Eventually(t, func() bool { return rest.SMs() < 116 }, 5*time.Second, 100*time.Microsecond, "the rest gives up its SMs at once")
		if !bounded {
			for gave := time.Now(); time.Since(gave) < 2*smmove.HandOffMax; time.Sleep(100 * time.Microsecond) {
				require.Equal(t, 16, lat.SMs(), "grown onto SMs whose work still runs")
			}
			drv.HoldEvents(false)
		}
		// Bounded: a giver whose queued work never ends holds the taker back
		// no longer than smmove.HandOffMax, so a burst is not kept on its floor for
		// as long as a deep queue.
		require.Eventually(t, func() bool { return lat.SMs() > 16 && lat.SMs()+rest.SMs() == 132 && lat.Stats().SMMoves > 0 },
			5*time.Second, time.Millisecond)
		stop()
		drv.HoldEvents(false)
		require.Eventually(t, func() bool { return lat.SMs() == 16 && rest.SMs() == 116 }, 5*time.Second, time.Millisecond)
	}
}

// A growth at once (smmove.GrowAtOnce, the A/B's variant): the latency
// class switches onto the SMs the rest gave while the work the rest queued
// there still runs, where a drained growth waits for it (the test above);
// and the class's streams, in every layout, are made at the device's
// greatest priority, the rest's at the default, so that on a GPU the
// class's blocks go first as the rest's leave those SMs.
func TestGrowthAtOnceDoesNotWaitForTheRestsWork(t *testing.T) {
	p, drv := openSim(t)
	p.moves.SetHandOff(time.Minute) // a drained growth would wait this long for the held work
	p.moves.SetGrowAtOnce(true)
	lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
	require.NoError(t, err)
	rest, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	prio := func(tn *Tenant) int {
		t.Helper()
		n, ok := drv.StreamPriority(cuda.Stream(tn.Stream().Handle()))
		require.True(t, ok, "a stream the driver does not know")
		return n
	}
	require.Equal(t, fake.GreatestPriority, prio(lat), "the latency class's stream")
	require.Zero(t, prio(rest), "the rest's stream")
	drv.HoldEvents(true) // the work queued before a Reshape never ends
	t.Cleanup(func() { drv.HoldEvents(false) })
	stop := burstOf(t, lat)
	require.Eventually(t, func() bool { return lat.SMs() > 16 && lat.SMs()+rest.SMs() == 132 && lat.Stats().SMMoves > 0 },
		5*time.Second, time.Millisecond, "grown while the rest's queued work still runs")
	require.Equal(t, fake.GreatestPriority, prio(lat), "the grown layout's stream")
	stop()
	drv.HoldEvents(false)
	require.Eventually(t, func() bool { return lat.SMs() == 16 && rest.SMs() == 116 }, 5*time.Second, time.Millisecond)
	require.Zero(t, prio(rest), "the rest's stream, grown back")
}

// A latency class closed while a move waits for the rest's queued work
// ends the move: the rest takes back what it gave, and nothing is lost.
func TestLatencyClassClosedMidMove(t *testing.T) {
	p, drv := openSim(t)
	p.moves.SetHandOff(time.Minute) // the Close comes inside the wait, however slow the host
	lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
	require.NoError(t, err)
	rest, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	drv.HoldEvents(true)
	t.Cleanup(func() { drv.HoldEvents(false) })
	stop := doLoop(16, func() {
		if err := lat.Do(context.Background(), func(Current) error { time.Sleep(200 * time.Microsecond); return nil }); err != nil {
			require.ErrorIs(t, err, ErrClosed)
		}
	})
	require.Eventually(t, func() bool { return rest.SMs() < 116 }, 5*time.Second, time.Millisecond)
	require.NoError(t, lat.Close())
	stop()
	require.Equal(t, 116, rest.SMs(), "the rest takes back what the move took")
	drv.HoldEvents(false)
	require.NoError(t, rest.Close())
	require.Equal(t, 132, p.Stats().FreeSMs)
	requireNoGreenHeld(t, p, drv)
}

// The public histogram's bounds are the engine's.
func TestMoveBoundsAreTheEngines(t *testing.T) {
	require.Equal(t, smmove.MoveBounds, MoveBounds)
}

// Issue 56: the rest tenant's queue is bounded (WithQueueHorizon, 150 µs by
// default) while a latency class may take its SMs, and not otherwise: a
// rest with no class beside it, one made with NoQueueHorizon, and the rest
// once the class has closed keep theirs unbounded.
func TestRestQueueBoundedWhileAClassTrades(t *testing.T) {
	p, _ := openSim(t)
	alone, err := p.NewTenant("alone", WithSMs(16), WithReshapeSizes(16, 32), WithGPUMetering())
	require.NoError(t, err)
	require.Zero(t, alone.c.adm.QueueBound(), "no class: no bound")
	require.NoError(t, alone.Close())
	for _, tc := range []struct {
		opts []TenantOption
		want time.Duration
	}{
		{nil, smmove.DefaultHorizon},
		{[]TenantOption{WithQueueHorizon(200 * time.Microsecond)}, 200 * time.Microsecond},
		{[]TenantOption{WithQueueHorizon(NoQueueHorizon)}, 0},
	} {
		lat, err := p.NewTenant("interactive", WithLatencyTarget(300*time.Microsecond, 16, 48))
		require.NoError(t, err)
		rest, err := p.NewTenant("batch", append([]TenantOption{WithRestOfSMs()}, tc.opts...)...)
		require.NoError(t, err)
		require.Equal(t, tc.want, rest.c.adm.QueueBound())
		require.NoError(t, lat.Close())
		require.Zero(t, rest.c.adm.QueueBound(), "the class gone, the queue is free")
		require.NoError(t, rest.Close())
	}
	_, err = p.NewTenant("x", WithRestOfSMs(), WithQueueHorizon(-5))
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// A relative target (issue 56): unknown (0) until the class has run at its
// most SMs under load, then that P99 times the factor; a burst meanwhile
// takes the most.
func TestRelativeLatencyTarget(t *testing.T) {
	p, drv := openSim(t)
	lat, err := p.NewTenant("interactive", WithRelativeLatencyTarget(1.2, 16, 48))
	require.NoError(t, err)
	// Kept: a tenant whose handle is garbage-collected is closed, and the
	// controller with it (a discarded handle here stopped it in 5 runs of
	// 60 under -race).
	batch, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	defer runtime.KeepAlive(batch)
	require.Zero(t, lat.Stats().LatencyTarget)
	require.True(t, p.moves.Steering(), "the controller runs")
	// Requests the controller times: a Synchronize of a stream whose work
	// takes 200 µs (held that long), 16 in flight.
	stop := sync.OnceFunc(doLoop(16, func() {
		s, err := lat.NewStream(ClassDefault)
		require.NoError(t, err)
		defer s.Close()
		release, err := drv.HoldStream(cuStream(s))
		require.NoError(t, err)
		time.AfterFunc(200*time.Microsecond, release)
		require.NoError(t, s.Synchronize())
	}))
	defer stop()
	// On a failure, what the controller did and why.
	waitFor := func(cond func() bool, what string) {
		t.Helper()
		if !assert.Eventually(t, cond, 5*time.Second, time.Millisecond, what) {
			s := lat.Stats()
			t.Fatalf("%s: not within 5 s; SMs %d, %d moves (%+v), the last: %q; target %v", what, lat.SMs(), s.SMMoves, s.SMMovesBy, s.SMMoveReason, s.LatencyTarget)
		}
	}
	waitFor(func() bool { return lat.SMs() == 48 }, "a burst takes the most while the target is unknown")
	waitFor(func() bool { return lat.Stats().LatencyTarget > 0 }, "measured at 48 SMs")
	stop()
	_, err = p.NewTenant("bad", WithRelativeLatencyTarget(0.5, 16, 48))
	require.ErrorIs(t, err, ErrInvalidArgument)
}
