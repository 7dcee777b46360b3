// Package stall watches the work a pool queued on its tenants' streams
// and says which tenant stopped making progress: a kernel that never ends
// (a spin on a flag nobody sets, a persistent kernel's deadlock, a
// collective whose peer died) or a stream waiting for an event nobody
// records. Such work gives no error; without a watchdog the tenant's
// calls block and nothing says which class is stuck.
//
// The watchdog is one goroutine per pool, beside the calls rather than on
// their path: no launch, Do or fill pays for it. Every tick it asks each
// watched stream whether its work is done (cuStreamQuery). Where work is
// outstanding it records a marker behind it (an event, at most a few
// pending per stream), and the stream is making progress while its
// markers complete. A stream whose markers have not moved for the bound
// (the work queued before the oldest one has run at least that long since
// the watchdog saw it begin) is stalled, and its tenant with it: the
// tenant hears it once (Tenant.Stalled), and the watchdog keeps it (Seen:
// the pool's Health names it until the process exits), logs it and hands
// it to the pool's handler. A kernel that legitimately runs longer than
// the bound is a stall too: the bound is the server's, to be set above the
// longest kernel (or graph, or library call) its class runs, and the
// queue it keeps in front of it.
//
// The tick is a twentieth of the smallest bound, within 1 to 5 ms, so a
// stall is seen within the bound plus two ticks (10 ms) of its work's
// start; each tick costs one query per watched stream, and a marker where
// the stream is busy.
package stall

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Stream is a watched stream as its tenant lists it at a tick.
type Stream struct {
	Key      Key         // names this stream's life: its watch is dropped once no tick lists it
	H        cuda.Stream // its handle now (a move may swap it between ticks)
	Class    string      // its class, for the report
	Launches uint64      // kernels launched on it through the SDK so far
	Kernel   string      // the last of them, for the report
}

// Pin is one of a tenant's streams as a look takes it (Look).
type Pin interface {
	// Pin counts the look in the stream's calls under way, so that the
	// stream's close waits for the look, and says what the stream is now;
	// false, with nothing counted, where it is no longer the stream of
	// life gen (its state reused), is under capture (a query or an event
	// would break the capture) or is closed.
	Pin(gen uint64) (Stream, bool)
	// Unpin ends what Pin counted.
	Unpin()
}

// Listed is a stream as its tenant listed it for a look: its pin, and its
// life then.
type Listed struct {
	Pin Pin
	Gen uint64
}

// Look calls f with the listed streams that could be pinned, and unpins
// them once f returns: a tenant's Streams, inside its life lock.
func Look(listed []Listed, f func([]Stream)) {
	list := make([]Stream, 0, len(listed))
	for i, l := range listed {
		s, ok := l.Pin.Pin(l.Gen)
		if !ok {
			listed[i].Pin = nil
			continue
		}
		list = append(list, s)
	}
	defer func() {
		for _, l := range listed {
			if l.Pin != nil {
				l.Pin.Unpin()
			}
		}
	}()
	f(list)
}

// Key names a stream's life: its state's address and generation (the
// state is reused by a later stream).
type Key struct {
	Core uintptr
	Gen  uint64
}

// Tenant is a watched tenant: the face's.
type Tenant interface {
	// Name names it in the report.
	Name() string
	// Streams calls f with its streams now, inside its life lock (a Close
	// waits for it; a stream under capture is left out, since a query or
	// an event would break the capture), and reports whether it could
	// (false: closed, or stalled already).
	Streams(f func([]Stream)) bool
	// Stalled marks it stalled, its calls refused from now on; called
	// once, from the watchdog. False: it was marked stalled already.
	Stalled(r Report) bool
}

// Report is a stall: which tenant, which stream, since when.
type Report struct {
	Tenant string
	Stream uintptr       // the stream's handle
	Class  string        // its class
	Since  time.Time     // the last progress seen on it (or when its work was first seen)
	Found  time.Time     // when the watchdog found it stalled
	Bound  time.Duration // the tenant's bound
	Queued uint64        // kernels launched on it through the SDK since its last progress (or, where it was busy when first seen, in all)
	Kernel string        // the last kernel launched on it ("" : none through the SDK, a Do's or a fill's work)
}

// Err is the stalled tenant's calls' answer: errs.ErrStalled, and what r
// says.
func (r Report) Err() error {
	return fmt.Errorf("%w: stream %#x (%s) made no progress from %s for %v (kernel %q last, %d launched since); "+
		"its work holds its SMs and memory until the process exits", errs.ErrStalled, r.Stream, r.Class, r.Since.Format(time.RFC3339Nano),
		r.Found.Sub(r.Since).Round(time.Millisecond), r.Kernel, r.Queued)
}

// Per stream, the markers pending at most: enough to see progress within
// a tick of a queue's draining, few enough that a stalled stream holds
// few events.
const maxMarks = 4

// Watchdog watches tenants' streams. Its methods are safe for concurrent
// use; the zero value is not: use New.
type Watchdog struct {
	drv     cuda.Driver
	primary cuda.Context // the context the calls are made with (any thread may have it)
	log     *slog.Logger // a stall found is logged
	onStall func(Report) // the pool's handler of a stall found (WithStallHandler), nil for none

	mu      sync.Mutex // a leaf: protects the following fields
	watched map[Tenant]time.Duration
	// seen is every stall found, its tenant closed or not: the pool's
	// Health names them until the process exits.
	seen    []Report
	tick    time.Duration
	started bool
	closed  bool
	kick    chan struct{} // a tenant added: the goroutine reads the new tick
	stop    chan struct{}
	done    chan struct{}

	// The goroutine's own.
	state map[Key]*watch
	free  []cuda.Event
}

// watch is the watchdog's state of one stream.
type watch struct {
	marks    []cuda.Event // pending, oldest first
	since    time.Time    // the last progress seen, or when its work was first seen
	launches uint64       // its launches then
	seen     bool         // listed at this tick
}

// New makes a watchdog over drv's streams, its calls made with primary. A
// stall it finds is logged to log (nil: none) and handed to onStall (nil:
// none) in a goroutine of its own.
func New(drv cuda.Driver, primary cuda.Context, log *slog.Logger, onStall func(Report)) *Watchdog {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watchdog{drv: drv, primary: primary, log: log, onStall: onStall, watched: map[Tenant]time.Duration{}, state: map[Key]*watch{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// Seen lists every stall found, its tenant closed or not: their work
// holds what it holds until the process exits. Nil for a nil watchdog (a
// pool whose Open failed before it).
func (w *Watchdog) Seen() []Report {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// TickFor is the tick for a smallest bound b.
func TickFor(b time.Duration) time.Duration {
	return min(max(b/20, time.Millisecond), 5*time.Millisecond)
}

// Watch watches t's streams with bound b (b > 0) until Unwatch; the
// goroutine starts with the first tenant.
func (w *Watchdog) Watch(t Tenant, b time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.watched[t] = b
	tick := TickFor(b)
	if w.tick == 0 || tick < w.tick {
		w.tick = tick
	}
	if !w.started {
		w.started = true
		go w.run(w.tick)
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Unwatch stops watching t (its Close, or its stall).
func (w *Watchdog) Unwatch(t Tenant) {
	w.mu.Lock()
	delete(w.watched, t)
	w.mu.Unlock()
}

// Close stops the goroutine, waits for it and destroys its markers.
func (w *Watchdog) Close() error {
	w.mu.Lock()
	closed, started := w.closed, w.started
	w.closed = true
	w.mu.Unlock()
	if closed || !started {
		return nil
	}
	close(w.stop)
	<-w.done
	var errs []error
	for _, st := range w.state {
		for _, ev := range st.marks {
			errs = append(errs, w.drv.EventDestroy(w.primary, ev))
		}
	}
	for _, ev := range w.free {
		errs = append(errs, w.drv.EventDestroy(w.primary, ev))
	}
	return errors.Join(errs...)
}

// run is the watchdog's goroutine.
func (w *Watchdog) run(tick time.Duration) {
	defer close(w.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	var tenants []Tenant
	var bounds []time.Duration
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
			w.mu.Lock()
			if w.tick < tick {
				tick = w.tick
				t.Reset(tick)
			}
			w.mu.Unlock()
			continue
		case <-t.C:
		}
		tenants, bounds = tenants[:0], bounds[:0]
		w.mu.Lock()
		for tn, b := range w.watched {
			tenants, bounds = append(tenants, tn), append(bounds, b)
		}
		w.mu.Unlock()
		for _, st := range w.state {
			st.seen = false
		}
		for i, tn := range tenants {
			w.look(tn, bounds[i])
		}
		w.forget()
		clear(tenants) // nothing kept reachable between ticks
	}
}

// look is one tick of t's streams.
func (w *Watchdog) look(t Tenant, bound time.Duration) {
	var found *Report
	t.Streams(func(streams []Stream) {
		for _, s := range streams {
			now := time.Now() // per stream: a look at many streams takes time
			st := w.state[s.Key]
			if st == nil {
				// First seen: where it is busy, what was queued before
				// is not known; all it launched counts (Report.Queued).
				st = &watch{since: now}
				w.state[s.Key] = st
			}
			st.seen = true
			if r, stalled := w.step(st, s, now, bound); stalled && found == nil {
				r.Tenant = t.Name()
				found = &r
			}
		}
	})
	if found != nil {
		w.Unwatch(t)
		if t.Stalled(*found) {
			w.found(*found)
		}
	}
}

// found records r once its tenant's calls are refused (Seen), says it in
// the log and hands it to the pool's handler.
func (w *Watchdog) found(r Report) {
	w.mu.Lock()
	w.seen = append(w.seen, r)
	w.mu.Unlock()
	w.log.Warn("tenant stalled: its work made no progress for its stall timeout; its calls are refused, the other tenants serve on; replace the process",
		"tenant", r.Tenant, "stream", fmt.Sprintf("%#x", r.Stream), "class", r.Class, "since", r.Since, "for", r.Found.Sub(r.Since),
		"kernel", r.Kernel, "queued", r.Queued)
	if w.onStall != nil {
		go w.onStall(r)
	}
}

// step is one tick of one stream: its completed markers popped (progress),
// a new one recorded behind outstanding work, and whether it is stalled.
func (w *Watchdog) step(st *watch, s Stream, now time.Time, bound time.Duration) (Report, bool) {
	for len(st.marks) > 0 {
		err := w.drv.EventQuery(w.primary, st.marks[0])
		if errors.Is(err, cuda.ErrorNotReady) {
			break
		}
		w.free = append(w.free, st.marks[0])
		st.marks = st.marks[1:]
		if err != nil {
			return Report{}, false // a lost device is the fault path's
		}
		st.since, st.launches = now, s.Launches
	}
	err := w.drv.StreamQuery(w.primary, s.H)
	switch {
	case err == nil: // idle: nothing outstanding, every marker reached
		w.release(st)
		st.since, st.launches = now, s.Launches
		return Report{}, false
	case !errors.Is(err, cuda.ErrorNotReady):
		return Report{}, false
	}
	if len(st.marks) == 0 {
		st.since = now // busy since it was first seen so
	}
	if len(st.marks) < maxMarks {
		if ev, err := w.event(); err == nil {
			if w.drv.EventRecord(w.primary, ev, s.H) == nil {
				st.marks = append(st.marks, ev)
			} else {
				w.free = append(w.free, ev)
			}
		}
	}
	if now.Sub(st.since) <= bound {
		return Report{}, false
	}
	return Report{Stream: uintptr(s.H), Class: s.Class, Since: st.since, Found: now, Bound: bound,
		Queued: s.Launches - st.launches, Kernel: s.Kernel}, true
}

// event is a marker event, reused where one is free.
func (w *Watchdog) event() (cuda.Event, error) {
	if n := len(w.free); n > 0 {
		ev := w.free[n-1]
		w.free = w.free[:n-1]
		return ev, nil
	}
	return w.drv.EventCreate(w.primary, cuda.EventDisableTiming)
}

// forget drops the state of the streams no tick listed (closed, or of a
// tenant no longer watched): their markers go back to the free list.
func (w *Watchdog) forget() {
	for k, st := range w.state {
		if !st.seen {
			w.release(st)
			delete(w.state, k)
		}
	}
}

// release puts st's markers on the free list: an event is recorded again
// wherever it is needed next, whatever it was behind before.
func (w *Watchdog) release(st *watch) {
	w.free = append(w.free, st.marks...)
	st.marks = st.marks[:0]
}
