package admission

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/nap"
	"github.com/fcsp-go/fcsp-go/stream"
)

// queueGate is a metered tenant (a throughput class's: no limit, its work
// timed) on the real clock, and the gate of one Default stream; events ev,
// which measure every piece of work at kernel.
func queueGate(t *testing.T, ev *events) (*Tenant, *Gate, *host) {
	t.Helper()
	ev.ms = float32(kernel.Seconds() * 1e3)
	h := new(host)
	tn, err := NewTenant(new(Pool), Config{Metered: true, Events: ev, Host: h})
	if err != nil {
		t.Fatal(err)
	}
	var g Gate
	var hv atomic.Uintptr
	var sclosed atomic.Bool
	if err := tn.Init(&g, stream.Default, &hv, &sclosed); err != nil {
		t.Fatal(err)
	}
	return tn, &g, h
}

// queued is the GPU time g's stream has queued and not seen complete, by
// its estimates.
func queuedOn(g *Gate) (items int, ns float64) {
	m := g.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.pending {
		ns += m.pending[i].cost(0)
	}
	return len(m.pending), ns
}

// launchQueued admits, without waiting, a launch estimated at 400 us
// (es) and queues it; false: refused with ErrThrottled.
func launchQueued(t *testing.T, g *Gate, es *Estimates) bool {
	t.Helper()
	var tk Ticket
	w := work(es)
	err := g.TryAdmit(&w, &tk)
	if errors.Is(err, errs.ErrThrottled) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Time(0, queued); err != nil {
		t.Fatal(err)
	}
	return true
}

const (
	horizon = time.Millisecond
	kernel  = 400 * time.Microsecond
)

// A throughput class's queue stays within its bound while the bound is
// on, whatever the prediction says, and is unbounded when it is off. The
// GPU here never finishes anything (the events never complete): with a
// 1 ms horizon and 400 us kernels the prediction lets three in at once
// (1.2 ms: the third went in at 0.8); once it has run out (the GPU should
// have done them by now) what the events have not seen complete still
// holds the queue: one more (the oldest might be nearly done), then none.
// In flight at most the horizon and two kernels, 1.6 ms < 1.8 ms.
func TestQueueBoundHoldsAThroughputClassQueue(t *testing.T) {
	ev := new(events)
	tn, g, _ := queueGate(t, ev)
	var es Estimates
	w := work(&es)
	es.For(w.Grid, w.Block).add(float64(kernel))

	// Off: as many as it likes.
	for i := range 100 {
		if !launchQueued(t, g, &es) {
			t.Fatalf("launch %d refused with no bound", i)
		}
	}
	if n, _ := queuedOn(g); n != 100 {
		t.Fatalf("%d queued, want 100", n)
	}
	ev.mu.Lock()
	ev.done = true
	ev.mu.Unlock()
	if err := tn.Poll(); err != nil {
		t.Fatal(err)
	}
	if n, _ := queuedOn(g); n != 0 {
		t.Fatalf("%d queued after all completed", n)
	}
	ev.mu.Lock()
	ev.done = false
	ev.mu.Unlock()

	if err := tn.SetQueueBound(horizon); err != nil {
		t.Fatal(err)
	}
	n := 0
	for launchQueued(t, g, &es) {
		n++
	}
	// Three, or four if the machine stalled 200 us between two of them.
	if n < 3 || n > 4 {
		t.Fatalf("%d admitted under a 1 ms horizon at once, want 3 (4 after a stall)", n)
	}
	time.Sleep(3 * horizon) // the prediction runs out
	for launchQueued(t, g, &es) {
		n++
	}
	if n != 4 {
		t.Fatalf("%d admitted once the prediction ran out, want 4 (the seen queue, less the oldest, under the horizon)", n)
	}
	_, ns := queuedOn(g)
	if limit := float64(horizon + 2*kernel); ns >= limit {
		t.Fatalf("%v queued, want under the horizon and two kernels (%v)", time.Duration(ns), time.Duration(limit))
	}
	// A waiting launch waits, deaf to the prediction, until its context
	// ends.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var tk Ticket
	if err := g.Admit(ctx, &w, &tk); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Admit over the bound = %v, want DeadlineExceeded", err)
	}
	// What the GPU finishes makes room.
	ev.mu.Lock()
	ev.done = true
	ev.mu.Unlock()
	if !launchQueued(t, g, &es) {
		t.Fatal("refused once the queue completed")
	}
	// Off again: unbounded.
	ev.mu.Lock()
	ev.done = false
	ev.mu.Unlock()
	if err := tn.SetQueueBound(0); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if !launchQueued(t, g, &es) {
			t.Fatalf("launch %d refused after the bound was turned off", i)
		}
	}
}

// A launch waiting for room is admitted when the queue completes, and a
// Close wakes it with ErrClosed.
func TestQueueBoundWaitEndsWhenTheQueueRuns(t *testing.T) {
	ev := new(events)
	tn, g, h := queueGate(t, ev)
	var es Estimates
	w := work(&es)
	es.For(w.Grid, w.Block).add(float64(kernel))
	if err := tn.SetQueueBound(horizon); err != nil {
		t.Fatal(err)
	}
	fill := func() { // until the seen queue alone holds it
		for launchQueued(t, g, &es) {
		}
		time.Sleep(3 * horizon)
		for launchQueued(t, g, &es) {
		}
	}
	fill()
	admit := func() chan error {
		done := make(chan error, 1)
		go func() {
			var tk Ticket
			w := work(&es)
			err := g.Admit(context.Background(), &w, &tk)
			if err == nil {
				err = tk.Time(0, queued)
			}
			done <- err
		}()
		return done
	}
	done := admit()
	select {
	case err := <-done:
		t.Fatalf("admitted over the bound: %v", err)
	case <-time.After(10 * time.Millisecond):
	}
	ev.mu.Lock()
	ev.done = true
	ev.mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting launch was not admitted once the queue completed")
	}

	ev.mu.Lock()
	ev.done = false
	ev.mu.Unlock()
	fill()
	done = admit()
	time.Sleep(5 * time.Millisecond)
	h.closed.Store(true)
	select {
	case err := <-done:
		if !errors.Is(err, errs.ErrClosed) {
			t.Fatalf("waiting launch after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}

// A Do is bounded as a launch is: its bracket's estimate is its runs'.
func TestQueueBoundHoldsDos(t *testing.T) {
	ev := new(events)
	tn, g, _ := queueGate(t, ev)
	dm, err := tn.doMeter()
	if err != nil {
		t.Fatal(err)
	}
	const key = 1
	dm.estimate(key).add(float64(kernel))
	if err := tn.SetQueueBound(horizon); err != nil {
		t.Fatal(err)
	}
	do := func() bool {
		r, own, err := tn.BeginDo(context.Background(), key, true)
		if errors.Is(err, errs.ErrThrottled) {
			return false
		}
		if err != nil || !own {
			t.Fatalf("BeginDo = %v, own %v", err, own)
		}
		if err := r.Start(1, 0); err != nil {
			t.Fatal(err)
		}
		if err := r.Take(g); err != nil {
			t.Fatal(err)
		}
		if err := r.End(); err != nil {
			t.Fatal(err)
		}
		return true
	}
	n := 0
	for do() {
		n++
	}
	if n < 3 || n > 4 {
		t.Fatalf("%d Dos admitted under a 1 ms horizon, want 3 (4 after a stall)", n)
	}
	ev.mu.Lock()
	ev.done = true
	ev.mu.Unlock()
	if !do() {
		t.Fatal("Do refused once the queue completed")
	}
	// A Do whose f takes no stream, and one abandoned before f ran, land
	// too: what stays in transit stops the prediction's reset for good.
	r, _, err := tn.BeginDo(context.Background(), key, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	if r, _, err = tn.BeginDo(context.Background(), key, false); err != nil {
		t.Fatal(err)
	}
	r.Abandon()
	if n := tn.transit.Load(); n != 0 {
		t.Fatalf("%d Dos' admissions still in transit", n)
	}
}

// The bound's argument is checked, and it needs the tenant's work timed.
func TestSetQueueBoundRefuses(t *testing.T) {
	tn, _, _ := queueGate(t, new(events))
	if err := tn.SetQueueBound(-time.Millisecond); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Errorf("negative horizon: %v, want ErrInvalidArgument", err)
	}
	limited, _ := gate(t, new(events), Config{SMLimit: 0.5, SMs: 1, ThreadsPerSM: 64, Refill: time.Millisecond})
	if err := limited.SetQueueBound(time.Millisecond); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Errorf("unmetered tenant: %v, want ErrInvalidArgument", err)
	}
	if err := limited.SetQueueBound(0); err != nil {
		t.Errorf("turning off a bound never set: %v", err)
	}
}

// Launches and Dos on several streams race the bound being turned on and
// off, the GPU finishing in fits, and Close: every admission returns
// (nil, or ErrClosed once closed), and once all completed the next is
// admitted at once, its prediction started afresh (a look that finds
// nothing in flight drops whatever the prediction kept).
func TestQueueBoundRacesItsSwitchAndClose(t *testing.T) {
	ev := new(events)
	tn, g, h := queueGate(t, ev)
	gates := []*Gate{g}
	for range 2 {
		var g2 Gate
		var hv atomic.Uintptr
		var sclosed atomic.Bool
		if err := tn.Init(&g2, stream.Default, &hv, &sclosed); err != nil {
			t.Fatal(err)
		}
		gates = append(gates, &g2)
	}
	var es Estimates
	w0 := work(&es)
	es.For(w0.Grid, w0.Block).add(float64(kernel))
	if err := tn.SetQueueBound(horizon); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	errc := make(chan error, 16)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			g := gates[i%len(gates)]
			for !stop.Load() {
				var err error
				if i%4 == 3 {
					var r *Run
					if r, _, err = tn.BeginDo(context.Background(), uintptr(i), i%2 == 0); err == nil {
						if err = r.Start(i, 0); err == nil {
							err = r.Take(g)
						}
						err = errors.Join(err, r.End())
					}
				} else {
					var tk Ticket
					w := work(&es)
					if i%2 == 0 {
						err = g.TryAdmit(&w, &tk)
					} else {
						err = g.Admit(context.Background(), &w, &tk)
					}
					if err == nil {
						err = tk.Time(0, queued)
					}
				}
				switch {
				case err == nil, errors.Is(err, errs.ErrThrottled):
				case errors.Is(err, errs.ErrClosed) && h.closed.Load():
					return
				default:
					errc <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			ev.mu.Lock()
			ev.done = i%3 != 0
			ev.mu.Unlock()
			_ = tn.SetQueueBound([]time.Duration{horizon, 0, horizon / 2}[i%3])
			time.Sleep(200 * time.Microsecond)
		}
	})
	time.Sleep(30 * time.Millisecond)
	h.closed.Store(true)
	ev.mu.Lock()
	ev.done = true
	ev.mu.Unlock()
	stop.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an admission did not return after Close")
	}
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	ev.mu.Lock()
	ev.done = true // the switcher may have held them again
	ev.mu.Unlock()
	if err := tn.Poll(); err != nil {
		t.Fatal(err)
	}
	for _, g := range gates {
		if n, _ := queuedOn(g); n != 0 {
			t.Fatalf("%d still queued after all completed", n)
		}
	}
	if n := tn.transit.Load(); n != 0 {
		t.Fatalf("%d admissions still in transit (land) after every one was queued, refused or given back", n)
	}
	h.closed.Store(false)
	if err := tn.SetQueueBound(horizon); err != nil {
		t.Fatal(err)
	}
	if !launchQueued(t, g, &es) {
		t.Fatal("refused with nothing in flight")
	}
	if ahead := time.Duration(tn.qtat.Load() - tn.now()); ahead > kernel {
		t.Errorf("the prediction is %v ahead with one kernel in flight", ahead)
	}
}

// gpuSim is a GPU that runs a tenant's work one piece after another, each
// for kernel, on a clock the test moves (now). A start event completes
// once its stream's work ahead has run (at once on an idle stream, the
// work ahead on another stream holding the SMs), an end event once its
// work has run: work admitted before the work ahead ends measures that
// wait too where it is on another stream, as on the GPU.
type gpuSim struct {
	mu     sync.Mutex
	now    int64
	next   cuda.Event
	at     map[cuda.Event]int64  // when each event completes
	busy   int64                 // when the work queued so far ends
	last   map[cuda.Stream]int64 // when each stream's work queued so far ends
	start  map[cuda.Stream]bool  // the stream's next record is a start event
	idle   int64                 // time the GPU had nothing to run, since counted
	counts bool
}

func (g *gpuSim) clock() int64 { g.mu.Lock(); defer g.mu.Unlock(); return g.now }

func (g *gpuSim) EventCreate(cuda.Context, uint32) (cuda.Event, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.next++
	return g.next, nil
}

func (g *gpuSim) EventRecord(_ cuda.Context, e cuda.Event, s cuda.Stream) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.start[s] = !g.start[s]; g.start[s] {
		g.at[e] = max(g.now, g.last[s])
		return nil
	}
	from := max(g.now, g.last[s])
	if g.busy > from {
		from = g.busy
	} else if g.counts {
		g.idle += from - g.busy
	}
	g.busy = from + int64(kernel)
	g.at[e], g.last[s] = g.busy, g.busy
	return nil
}

func (g *gpuSim) EventQuery(_ cuda.Context, e cuda.Event) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at[e] > g.now {
		return cuda.ErrorNotReady
	}
	return nil
}

func (g *gpuSim) EventElapsedMs(_ cuda.Context, a, b cuda.Event) (float32, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return float32(g.at[b]-g.at[a]) / 1e6, nil
}

func (g *gpuSim) EventDestroy(cuda.Context, cuda.Event) error { return nil }

func (g *gpuSim) advance(d time.Duration) { g.mu.Lock(); g.now += int64(d); g.mu.Unlock() }

// simBounded is a metered tenant on sim's clock, its work run by sim, its
// queue bounded at h, and the gates of two of its Default streams.
func simBounded(t *testing.T, h time.Duration) (*gpuSim, *Tenant, *[2]Gate) {
	t.Helper()
	sim := &gpuSim{at: map[cuda.Event]int64{}, last: map[cuda.Stream]int64{}, start: map[cuda.Stream]bool{}}
	tn, err := NewTenant(new(Pool), Config{Metered: true, Events: sim, Host: new(host), Clock: sim.clock})
	if err != nil {
		t.Fatal(err)
	}
	gates := new([2]Gate)
	hv := new([2]atomic.Uintptr)
	sclosed := new([2]atomic.Bool)
	for i := range gates {
		hv[i].Store(uintptr(i + 1))
		if err := tn.Init(&gates[i], stream.Default, &hv[i], &sclosed[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tn.SetQueueBound(h); err != nil {
		t.Fatal(err)
	}
	return sim, tn, gates
}

// Under the bound a throughput class keeps the GPU busy: its next work
// goes in about the horizon before the work ahead ends, whatever the host
// takes to launch it (up to the horizon). The host here looks every
// microsecond and takes 10 to 30 us from its admission to the work
// queued; 400 us kernels, a 50 us horizon; two streams, each given two
// pieces in turn (a batch class's workers, each queuing a pair). Before
// the estimates learnt the work's own time (own), they learnt its wait
// behind the kernel ahead too: the next work went in as the one ahead
// ended, less the host's time, and every launch slower than the last left
// the GPU idle. And the bound still holds: never more queued ahead than a
// kernel, the horizon and the host's launch; a piece queued behind its
// stream's last is not taken for one with a lead (its start waits), or
// the estimate would learn too little and let two kernels in.
func TestQueueBoundKeepsTheGPUBusy(t *testing.T) {
	const (
		h = 50 * time.Microsecond
		n = 400
	)
	sim, tn, gates := simBounded(t, h)
	var es Estimates
	var worst int64
	var countedFrom int64
	for i := range n {
		if i == n/2 { // the first half learns
			sim.mu.Lock()
			sim.counts, sim.idle, countedFrom = true, 0, sim.now
			sim.mu.Unlock()
		}
		g := &gates[i/2%2]
		var tk Ticket
		w := work(&es)
		for {
			err := g.TryAdmit(&w, &tk)
			if err == nil {
				break
			}
			if !errors.Is(err, errs.ErrThrottled) {
				t.Fatal(err)
			}
			sim.advance(time.Microsecond)
		}
		sim.advance(time.Duration(10+i*7919%21) * time.Microsecond) // the host's launch: 10-30 us
		if err := tk.Time(0, queued); err != nil {
			t.Fatal(err)
		}
		sim.mu.Lock()
		if sim.counts {
			worst = max(worst, sim.busy-sim.now)
		}
		sim.mu.Unlock()
	}
	sim.mu.Lock()
	idle, span := sim.idle, sim.now-countedFrom
	sim.mu.Unlock()
	if frac := float64(idle) / float64(span); frac > 0.01 {
		t.Errorf("the GPU idled %v of %v (%.1f%%) under a %v horizon with launches of 10-30 us, want under 1%%",
			time.Duration(idle), time.Duration(span), 100*frac, h)
	}
	if limit := int64(kernel + h + 30*time.Microsecond); worst > limit {
		t.Errorf("%v queued ahead at most, want at most a kernel, the horizon and the host's launch (%v)", time.Duration(worst), time.Duration(limit))
	}
	if n := tn.transit.Load(); n != 0 {
		t.Errorf("%d admissions still in transit after every one was queued", n)
	}
}

// Work admitted but not yet queued (the host between its admission and its
// launch, 10-30 us for a launch, a library's setup inside a Do) is in no
// meter: a look that then finds every meter empty took the GPU for idle
// and brought the prediction back to now, erasing that work's charge, and
// the next work went in at once: two kernels queued where the bound means
// one (on an H100, run J1: growths that waited 2.3-2.6 ms, a 1.45 ms
// kernel and most of the next). Here: a 400 us kernel runs; the next is
// admitted 50 us before it ends and launched only after it has ended; a
// third asked for meanwhile must wait for the second's prediction.
func TestQueueBoundCountsWorkAdmittedNotYetQueued(t *testing.T) {
	const h = 50 * time.Microsecond
	sim, tn, gates := simBounded(t, h)
	var es Estimates
	w := work(&es)
	es.For(w.Grid, w.Block).add(float64(kernel))
	var first, second, third Ticket
	if err := gates[0].TryAdmit(&w, &first); err != nil {
		t.Fatal(err)
	}
	if err := first.Time(0, queued); err != nil {
		t.Fatal(err)
	}
	sim.advance(kernel - h + time.Microsecond) // the first ends within the horizon
	if err := gates[1].TryAdmit(&w, &second); err != nil {
		t.Fatalf("the second, %v before the first ends: %v", h, err)
	}
	sim.advance(h) // the first has ended; the second is not launched yet
	if err := gates[0].TryAdmit(&w, &third); !errors.Is(err, errs.ErrThrottled) {
		t.Fatalf("a third while the second, admitted, is not queued yet: %v, want ErrThrottled (the second's %v still ahead)", err, kernel)
	}
	if err := second.Time(0, queued); err != nil {
		t.Fatal(err)
	}
	sim.advance(kernel - h)
	if err := gates[0].TryAdmit(&w, &third); err != nil {
		t.Fatalf("the third, %v before the second ends: %v", h, err)
	}
	third.Cancel()
	sim.advance(time.Second)
	if err := tn.Poll(); err != nil {
		t.Fatal(err)
	}
	if n := tn.transit.Load(); n != 0 {
		t.Fatalf("%d admissions left in transit after every piece was queued or cancelled", n)
	}
}

// The bound's wait has three ways to wait (a spin, the thread's sleep, a Go
// timer past nap.Long): each waits at least what it was asked less its
// slack, and each gives ctx's error once ctx is done.
func TestPauseWaysWaitAndHonourCtx(t *testing.T) {
	for _, d := range []time.Duration{40 * time.Microsecond, 300 * time.Microsecond, 3 * time.Millisecond} {
		slack := time.Duration(0)
		switch {
		case d > nap.Long:
			slack = timerSlack
		case d > spinBelow:
			slack = napSlack
		}
		start := time.Now()
		if err := pause(context.Background(), d); err != nil {
			t.Fatalf("pause(%v): %v", d, err)
		}
		if took := time.Since(start); took < d-slack {
			t.Errorf("pause(%v) returned after %v, before %v less its %v slack", d, took, d, slack)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := pause(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("pause(%v) with ctx done: %v, want context.Canceled", d, err)
		}
	}
}
