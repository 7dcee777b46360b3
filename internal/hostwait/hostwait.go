// Package hostwait is how a pool's host threads wait for a stream: in the
// driver (cuStreamSynchronize, which spins the OS thread), by polling
// cuStreamQuery from Go, asleep on a blocking-sync event, or adaptively
// among the three. The policy is chosen once, when the pool opens
// (fcsp.WithHostWait).
package hostwait

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/freelist"
)

// Wait waits for stream s with ctx: done, where not nil, ends the wait
// early with ErrEnded (a wait in the driver cannot be ended; callers run it
// aside). h, where not nil, is the stream's history of waits, which the
// adaptive wait reads and keeps.
type Wait func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, h *History, done <-chan struct{}) error

// ErrEnded: a wait ended by its done channel before the stream's work did.
var ErrEnded = errors.New("wait ended")

// AdaptiveSpin is how long the adaptive wait polls before it yields, once
// it polls at all.
const AdaptiveSpin = 50 * time.Microsecond

// Waiters counts the process's waits in flight, for Adaptive: the host's
// cores are the process's, whatever the pool.
var Waiters atomic.Int32

// Adaptive, the default, sleeps where the stream's recent waits were long
// (past LongWait) while Go's scheduler is busy (nap: asleep until shortly
// before the expected end, then polling), so that a batch class's
// goroutines waiting milliseconds for their GEMMs do not each spin a core
// the server's other goroutines need; otherwise it
// spins in the driver while the process's waiters leave the host cores to
// spare (at most limit of them wait), and past that polls from Go,
// yielding after AdaptiveSpin: a lone request gets the driver's latency,
// and 32 waiters on 16 cores share them through Go's scheduler instead of
// being descheduled by the kernel for milliseconds (H200 host,
// docs/BENCHMARKS.md run R: K=16 P99/P50 42 with the driver's wait, 1.65
// polled; K=1 the same either way). blk may be nil: no wait sleeps then.
//
// Why both conditions (H200, run BB): sleeping through every wait longer
// than 250 µs took K=4 under a server's storm from 2.02x its quiet P99 to
// 1.09x (12.5 host cores busy to 9.6), but cost a lone batch goroutine 6%
// of its throughput (the GPU idles while the thread wakes) and 16
// concurrent requests of 400 µs their tail (P99/P50 1.15 to 2.40).
func Adaptive(limit int32, blk *Blocker) Wait {
	poll := Poll(AdaptiveSpin)
	return func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, h *History, done <-chan struct{}) error {
		if h == nil {
			return adapt(drv, ctx, s, done, limit, poll)
		}
		start := time.Now()
		if blk != nil && done == nil && h.Long() && schedBusy(start) {
			waited, err := nap(drv, ctx, s, h, start, blk)
			if waited {
				h.Add(time.Since(start))
			}
			return err
		}
		err := adapt(drv, ctx, s, done, limit, poll)
		h.Add(time.Since(start))
		return err
	}
}

// nap is the adaptive wait of a long one on a busy host: asleep in Go (no
// thread, no core) through most of the wait the stream's history expects,
// then polling, yielding between polls, until the work is done; a wait that
// runs well past what was expected sleeps on a blocking-sync event from
// then on. Sleeping on the event from the start left the GPU idle while
// the driver's thread woke and then waited for a P: a lone batch goroutine
// two GEMMs deep lost 3-6% of its throughput to a busy server (H200, runs
// BB and PP; QQ, waking early: 1%); this wakes ahead of the work's end.
//
// It asks the stream first and sleeps only when work is outstanding: a
// Synchronize of a stream with nothing left to do slept 7/8 of its history
// (34.5 ms of 40). waited is false when there was nothing to wait for; such
// a wait says nothing of how long the stream's work takes, and is kept out
// of its history.
func nap(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, h *History, start time.Time, blk *Blocker) (waited bool, err error) {
	if err := drv.StreamQuery(ctx, s); err == nil || !errors.Is(err, cuda.ErrorNotReady) {
		return false, err
	}
	expect := time.Duration(h.avg.Load())
	if d := expect - expect/NapEarly - time.Since(start); d > 0 {
		time.Sleep(d)
	}
	late := expect + expect/4
	for {
		err := drv.StreamQuery(ctx, s)
		if err == nil || !errors.Is(err, cuda.ErrorNotReady) {
			return true, err
		}
		if time.Since(start) > late {
			return true, blk.Wait(s)
		}
		runtime.Gosched()
	}
}

// NapEarly: the sleeping wait wakes 1/NapEarly of the expected wait ahead
// of its end (375 µs of a 3 ms one), which covers a sleep's overshoot on a
// busy host, and polls from there.
const NapEarly = 8

// adapt is the adaptive wait of a short one: the driver's under the limit,
// polled past it.
func adapt(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}, limit int32, poll Wait) error {
	n := Waiters.Add(1)
	defer Waiters.Add(-1)
	if n > limit || done != nil { // a wait that a ctx may end polls
		return poll(drv, ctx, s, nil, done)
	}
	return drv.StreamSynchronize(ctx, s)
}

// LongWait is the average wait past which the adaptive wait may sleep
// rather than spin: waking from a blocking-sync event costs tens of
// microseconds, a small part of a wait this long, while spinning through it
// costs a core. A request of a few hundred microseconds keeps spinning.
const LongWait = time.Millisecond

// sched is Go's scheduler's load as the adaptive wait reads it: busy when
// goroutines wait for a P, or half the Ps run Go code. A core a waiter
// spins is then taken from them; on an idle host spinning costs nothing and
// wakes soonest. Read from runtime/metrics at most once a millisecond (a
// read is about 70 ns), so a wait usually pays two atomic loads.
var sched schedLoad

type schedLoad struct {
	at  atomic.Int64 // UnixNano of the last read
	hot atomic.Bool  // the last read found it busy
	mu  sync.Mutex
	s   [3]metrics.Sample // guarded by mu
}

func (l *schedLoad) busy(now time.Time) bool {
	if t := now.UnixNano(); t-l.at.Load() > int64(time.Millisecond) && l.mu.TryLock() {
		if l.s[0].Name == "" {
			l.s[0].Name = "/sched/goroutines/runnable:goroutines"
			l.s[1].Name = "/sched/goroutines/running:goroutines"
			l.s[2].Name = "/sched/gomaxprocs:threads"
		}
		metrics.Read(l.s[:])
		runnable, running, procs := value(l.s[0]), value(l.s[1]), value(l.s[2])
		l.hot.Store(runnable > 0 || (procs > 0 && 2*running >= procs))
		l.at.Store(t)
		l.mu.Unlock()
	}
	return l.hot.Load()
}

// value is a sample's count; 0 where this Go does not have the metric.
func value(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// History is one stream's recent waits: a moving average of their length
// (each new wait weighs 1/8), kept by the adaptive wait. The zero value is
// a stream with no long waits.
type History struct{ avg atomic.Int64 }

// Long reports whether the stream's recent waits averaged past LongWait.
func (h *History) Long() bool { return time.Duration(h.avg.Load()) > LongWait }

// Reset forgets the waits (a stream's reused state).
func (h *History) Reset() { h.avg.Store(0) }

// Add folds one wait into the average. Concurrent waits on one stream may
// lose an update to each other: the average stays a fair one.
func (h *History) Add(d time.Duration) {
	old := h.avg.Load()
	h.avg.Store(old + (int64(d)-old)/8)
}

// Blocker makes the waits that sleep: it records a blocking-sync event on
// the stream and waits for it in cuEventSynchronize, which puts the thread
// to sleep until the GPU reaches the event, where cuStreamSynchronize on a
// context of the default scheduling spins a core. Its events are made in
// one context (the device's primary context), which serves the streams of
// every green context of the device (docs/CONTEXTS.md), and reused.
type Blocker struct {
	drv  cuda.Driver
	ctx  cuda.Context
	free freelist.List[cuda.Event]
}

// NewBlocker makes a Blocker whose events drv makes in ctx.
func NewBlocker(drv cuda.Driver, ctx cuda.Context) *Blocker {
	return &Blocker{drv: drv, ctx: ctx}
}

// Wait waits for the work queued on s so far, asleep.
func (b *Blocker) Wait(s cuda.Stream) error {
	ev, err := b.take()
	if err != nil {
		return err
	}
	if err = b.drv.EventRecord(b.ctx, ev, s); err == nil {
		err = b.drv.EventSynchronize(b.ctx, ev)
	}
	if err != nil {
		// An event a failed call touched is not trusted again.
		return errors.Join(err, b.drv.EventDestroy(b.ctx, ev))
	}
	b.put(ev)
	return nil
}

func (b *Blocker) take() (cuda.Event, error) {
	if ev, ok, closed := b.free.Take(); ok {
		return ev, nil
	} else if closed {
		return 0, ErrClosed
	}
	return b.drv.EventCreate(b.ctx, cuda.EventBlockingSync|cuda.EventDisableTiming)
}

func (b *Blocker) put(ev cuda.Event) {
	if !b.free.Put(ev, 0) {
		_ = b.drv.EventDestroy(b.ctx, ev) // closed meanwhile
	}
}

// Close destroys the free events; a wait under way destroys its own when
// it ends, and later waits return ErrClosed.
func (b *Blocker) Close() error {
	var errs []error
	for _, ev := range b.free.Close() {
		errs = append(errs, b.drv.EventDestroy(b.ctx, ev))
	}
	return errors.Join(errs...)
}

// ErrClosed: a Blocker's wait after its Close (the shared sentinel, so
// that a Synchronize racing the pool's Close reads as fcsp.ErrClosed).
var ErrClosed = errs.ErrClosed

// Driver waits in cuStreamSynchronize; done is not heeded.
func Driver(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, _ *History, _ <-chan struct{}) error {
	return drv.StreamSynchronize(ctx, s)
}

// Poll waits by polling cuStreamQuery: without letting go of the
// goroutine's P for spin (a request's GPU work is often done within tens
// of microseconds, and a yield costs the waiter its P), then yielding
// between polls. Waiters past the spin then share the host's cores through
// Go's scheduler, which switches between them in microseconds, where a
// thread spinning in the driver is descheduled by the kernel for
// milliseconds once waiters outnumber cores (H200 host, 32 threads waiting
// for 40 µs kernels on 16 cores: P99 1.1 ms against 0.1 ms with 16
// threads; testdata/h200-syncwait.tsv at the module root).
func Poll(spin time.Duration) Wait {
	return func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, _ *History, done <-chan struct{}) error {
		var start time.Time
		for i := 0; ; i++ {
			err := drv.StreamQuery(ctx, s)
			if err == nil || !errors.Is(err, cuda.ErrorNotReady) {
				return err
			}
			select {
			case <-done:
				return ErrEnded
			default:
			}
			switch {
			case i == 0:
				start = time.Now()
			case time.Since(start) >= spin:
				runtime.Gosched()
			}
		}
	}
}

// SetSchedBusy makes the adaptive wait see Go's scheduler as busy or idle
// whatever it is, until the returned function restores the reading: for
// tests of the sleeping wait, whose outcome would otherwise depend on the
// test machine's cores.
func SetSchedBusy(busy bool) (restore func()) {
	v := int32(schedIdle)
	if busy {
		v = schedHot
	}
	old := schedForced.Swap(v)
	return func() { schedForced.Store(old) }
}

// schedForced overrides the reading (SetSchedBusy): 0 none.
var schedForced atomic.Int32

const (
	schedHot  = 1
	schedIdle = 2
)

// schedBusy is sched's reading, or the one a test forced.
func schedBusy(now time.Time) bool {
	switch schedForced.Load() {
	case schedHot:
		return true
	case schedIdle:
		return false
	}
	return sched.busy(now)
}

// For is the wait a pool's WithHostWait chose: unset, Adaptive over half
// the cores Go may use (a container's CPU limit), sleeping on blk's events;
// inDriver, Driver; else Poll(spin).
func For(set, inDriver bool, spin time.Duration, blk *Blocker) Wait {
	switch {
	case !set:
		return Adaptive(int32(max(runtime.GOMAXPROCS(0)/2, 1)), blk)
	case inDriver:
		return Driver
	}
	return Poll(spin)
}

// Within runs f and returns its error, or ctx.Err() if ctx ends first (or
// had ended); f then runs to its end on its own goroutine, so the one wait
// (f's) stays in f.
func Within(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	if ctx.Err() != nil {
		return ctx.Err() // started, not waited for
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Bounded runs wait bounded by ctx. An ended ctx runs nothing and returns
// its error; a ctx that never ends runs wait(nil) here. Otherwise a wait
// that its done channel cannot end (aside: the driver's, cuMemFree) runs
// aside as Within runs it, and one that it can is handed ctx.Done() and,
// ended by it, answers ctx.Err().
func Bounded(ctx context.Context, aside bool, wait func(done <-chan struct{}) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return wait(nil)
	}
	if aside {
		return Within(ctx, func() error { return wait(nil) })
	}
	if err := wait(ctx.Done()); err != ErrEnded {
		return err
	}
	return ctx.Err()
}
