package fcsp

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// Metering and admission of Tenant.Do on a metered tenant (WithGPUMetering,
// WithGPUShare).
//
// The SDK cannot see the kernels a library queues, only the streams it gave
// the library: so when f takes a stream's handle from Current.Stream, an
// event is recorded on that stream (the bracket opens), and when f returns
// another (it closes). The GPU time between the two, less the time of the
// SDK's own timed launches queued on that stream meanwhile (measured by
// their own events, by f or by anyone), is the Do's, added to the tenant
// and to the stream's class when the events complete, read back lazily
// like a launch's. One stream has at most one bracket open: a Do that takes
// a stream whose bracket another Do opened joins it, and the bracket's time
// is split between them, so the tenant's total stays exact. On an idle
// stream the bracket also holds the CPU time from taking the handle to the
// first work queued (the start event runs at once): a few microseconds
// that a Do which takes the handle early is charged for.
//
// Under WithGPUShare, Do is admitted before f runs, charged a running
// estimate of its cost (the sum over its brackets of their time scaled by
// the stream's class factor), one refill period the first time, and the
// bucket is corrected by the difference once its brackets are measured.

var errTakenAfterDo = fmt.Errorf("%w: Current.Stream called after its Do returned; a Current is valid during its call of f", ErrInvalidArgument)

// doMeter is a metered tenant's state for Do, made at its first Do.
type doMeter struct {
	bucket *tokenbucket.Stream // Do's admission under a GPU share; nil otherwise
	// est maps a call site (f's code pointer) to the estimate of its cost.
	// The code pointer is the func literal's: every closure made by one
	// literal shares it, and one literal in a server is, in the usual case,
	// one kind of library work. It costs no allocation and no help from the
	// caller (BenchmarkDoKey: about 20-25 ns on the 2-core CPU machine).
	// An explicit key would need an API for a case the running estimate
	// and the correction already absorb: work of varying size under one literal
	// averages in the estimate; the correction keeps the share exact anyway,
	// and the estimate only decides how far ahead a Do is admitted.
	est  sync.Map // uintptr -> *estimate
	mu   sync.Mutex
	runs map[int]*doRun // OS thread inside a Do -> its run (a nested Do joins it)
}

// doMeter is the tenant's Do meter, made on first use.
func (c *tenantCore) doMeter() (*doMeter, error) {
	if dm := c.dm.Load(); dm != nil {
		return dm, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if dm := c.dm.Load(); dm != nil {
		return dm, nil
	}
	dm := &doMeter{runs: map[int]*doRun{}}
	if c.gpuShare {
		b, err := c.limiter.NewStream(1)
		if err != nil {
			return nil, err
		}
		// The limiter closes the buckets it lists when the tenant closes;
		// one made after that Close began is closed here.
		if c.closed.Load() {
			_ = b.Close()
		}
		dm.bucket = b
	}
	c.dm.Store(dm)
	return dm, nil
}

func (dm *doMeter) estimate(key uintptr) *estimate {
	if v, ok := dm.est.Load(key); ok {
		return v.(*estimate)
	}
	v, _ := dm.est.LoadOrStore(key, new(estimate))
	return v.(*estimate)
}

// doRun is one metered call of Do.
type doRun struct {
	gctx    cuda.Context // the context the Do made current on its thread: its events use it (no switch)
	dm      *doMeter
	est     *estimate
	charged float64          // tokens charged at admission; 0: nothing to correct
	mark    tokenbucket.Mark // the bucket's parameters just before that charge
	extra   float64          // a bandwidth floor's surcharge (dofloor.go): not corrected
	thread  int

	mu     sync.Mutex
	used   []bracketUse // the streams f took, with the bracket each joined
	left   int          // brackets not yet measured, plus one until f returns
	tokens float64      // measured so far, scaled by class
	gone   bool         // a bracket was lost: neither learn nor correct
	ended  bool         // f has returned: no stream may be taken any more
}

type bracketUse struct {
	s  *Stream
	br *bracket
}

// bracket is a Do's interval on one stream, from the event recorded when f
// took the stream to the one recorded when the last Do in it returned.
type bracket struct {
	start cuda.Event
	runs  []*doRun // the Dos that took the stream while it was open
	users int      // of them, those whose f has not returned
	inner float64  // ns of the SDK's timed launches queued inside (under the meter's lock)
}

func (b *bracket) measured(tokens float64) {
	for _, r := range b.runs {
		r.done(tokens/float64(len(b.runs)), false)
	}
}

func (b *bracket) lost() {
	for _, r := range b.runs {
		r.done(0, true)
	}
}

// done folds in one measured bracket (or f's return, with 0), and once the
// last is in, teaches the estimate and corrects the bucket.
func (r *doRun) done(tokens float64, lost bool) {
	r.mu.Lock()
	r.tokens += tokens
	r.gone = r.gone || lost
	r.left--
	last := r.left == 0
	r.mu.Unlock()
	if !last || r.gone {
		return
	}
	r.est.add(r.tokens)
	if r.charged > 0 && r.dm.bucket != nil {
		r.dm.bucket.AdjustSince(r.tokens-r.charged, r.mark) // see Stream.pollLocked
	}
}

// beginDo admits a Do of f on a metered tenant and returns its run. A Do
// nested in another on the same thread joins the outer run (admitted
// already) and own is false.
func (c *tenantCore) beginDo(ctx context.Context, f func(Current) error, try bool) (r *doRun, own bool, err error) {
	dm, err := c.doMeter()
	if err != nil {
		return nil, false, err
	}
	dm.mu.Lock()
	if len(dm.runs) > 0 {
		// Only the goroutine locked to this thread can be here while a Do
		// runs on it: that Do is this goroutine's own.
		if outer := dm.runs[unix.Gettid()]; outer != nil {
			dm.mu.Unlock()
			return outer, false, nil
		}
	}
	dm.mu.Unlock()
	r = &doRun{dm: dm, est: dm.estimate(reflect.ValueOf(f).Pointer()), left: 1}
	if dm.bucket == nil || (c.limiter.SMLimit() >= 1 && c.prio.floor == 0) {
		return r, true, nil // metered only; a share of 1 is no limit (see gpuCost)
	}
	// Fold in what completed, so the estimate and the bucket are current.
	// A partition's streams are polled at the end of each Do instead (as
	// before the slots, when polling here would have waited for the
	// partition's one exclusion, deaf to ctx).
	if !c.place.partitioned() {
		if err := c.pollStreams(); err != nil {
			return nil, false, err
		}
	}
	predicted := func() float64 {
		if ns := r.est.get(); ns != 0 {
			return ns
		}
		return c.limiter.Capacity() // not measured yet: a whole refill period
	}
	// Evaluated again when a change of share (or, with a floor, the
	// latency tenants' idling) wakes a waiting Do.
	var extra float64
	cost := func() float64 {
		var base float64
		if c.limiter.SMLimit() < 1 {
			base = predicted()
		}
		extra = c.floorExtra(base, predicted)
		return base + extra
	}
	var total float64
	r.mark = dm.bucket.Mark() // just before the charge (see launchMetered)
	if try {
		if total = cost(); !dm.bucket.TryAcquire(total) {
			if c.closed.Load() {
				return nil, false, ErrClosed
			}
			return nil, false, ErrThrottled
		}
	} else if total, err = c.waitFloored(ctx, dm.bucket, cost, &extra); err != nil {
		return nil, false, admitErr(err)
	}
	r.charged, r.extra = total-extra, extra
	return r, true, nil
}

// pollStreams folds in the completed work of every metered stream.
func (c *tenantCore) pollStreams() error {
	c.mu.Lock()
	streams := make([]*Stream, 0, len(c.streams))
	for _, s := range c.streams {
		if s.meter != nil {
			streams = append(streams, s)
		}
	}
	c.mu.Unlock()
	if len(streams) == 0 {
		return nil
	}
	return c.do(func(ctx cuda.Context) error {
		var errs []error
		for _, s := range streams {
			errs = append(errs, s.poll(ctx))
		}
		return errors.Join(errs...)
	})
}

// start registers the run as the one on this (locked) thread, where ctx is
// current.
func (r *doRun) start(thread int, ctx cuda.Context) {
	r.thread, r.gctx = thread, ctx
	r.dm.mu.Lock()
	r.dm.runs[thread] = r
	r.dm.mu.Unlock()
}

// abandon gives back the charge of a run whose f never ran.
func (r *doRun) abandon() {
	if r.charged+r.extra > 0 {
		r.dm.bucket.AdjustSince(-(r.charged + r.extra), r.mark)
	}
}

// take opens, or joins, s's bracket for the run: called when f takes s's
// handle, on f's thread (the tenant's context current, its exclusion held).
func (r *doRun) take(s *Stream) error {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return errTakenAfterDo
	}
	for _, u := range r.used {
		if u.s == s {
			r.mu.Unlock()
			return nil
		}
	}
	r.mu.Unlock()
	m, drv := s.meter, s.t.pool.drv
	// With the Do's own context, current on this thread: pushing another
	// (the primary) would switch the thread's context twice per call.
	return s.t.doWith(r.gctx, func(ctx cuda.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		// Fold in what completed: a stream used only through Do has no
		// launch to do it, and its queue must not grow unread.
		if err := s.pollLocked(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		ended := r.ended
		r.mu.Unlock()
		if ended {
			return errTakenAfterDo // a bracket opened now would never close
		}
		br := m.open
		if br == nil {
			ev, err := m.event(drv, ctx)
			if err != nil {
				return err
			}
			if err := drv.EventRecord(ctx, ev, s.h()); err != nil {
				m.free = append(m.free, ev)
				return err
			}
			br = &bracket{start: ev}
			m.open = br
			s.markBusy() // priority.go: f may be queuing work now
		}
		br.runs = append(br.runs, r)
		br.users++
		r.mu.Lock()
		r.used = append(r.used, bracketUse{s, br})
		r.left++
		r.mu.Unlock()
		return nil
	})
}

// takeBound opens the run's brackets on the tenant's streams that an
// earlier Do handed out (Stream.bound), before f runs: a library queues on
// the handle it kept without asking Current again. A stream closed
// meanwhile is skipped.
func (r *doRun) takeBound(c *tenantCore) error {
	c.mu.Lock()
	var bound []*Stream
	for _, s := range c.streams {
		if s.meter != nil && s.bound.Load() {
			bound = append(bound, s)
		}
	}
	c.mu.Unlock()
	for _, s := range bound {
		if err := r.take(s); err != nil && !(s.closed.Load() && errors.Is(err, ErrClosed)) {
			return err
		}
	}
	return nil
}

// end closes the run's brackets once f has returned (still on f's thread),
// and unregisters the run. A bracket whose stream was closed meanwhile was
// ended as lost by that Close.
func (r *doRun) end(c *tenantCore) error {
	r.dm.mu.Lock()
	delete(r.dm.runs, r.thread)
	r.dm.mu.Unlock()
	r.mu.Lock()
	r.ended = true
	used := r.used
	r.mu.Unlock()
	var errs []error
	for _, u := range used {
		errs = append(errs, u.s.closeBracket(u.br, r.gctx))
	}
	r.done(0, false) // f returned
	if c.place.partitioned() && r.dm.bucket != nil {
		errs = append(errs, c.pollStreams()) // see beginDo
	}
	if err := errors.Join(errs...); err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("tenant %q: Do: metering: %w", c.name, err)
	}
	return nil
}

// closeBracket ends one Do's use of br, recording its end event when it is
// the last.
func (s *Stream) closeBracket(br *bracket, gctx cuda.Context) error {
	m, drv := s.meter, s.t.pool.drv
	return s.t.doWith(gctx, func(ctx cuda.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.open != br {
			return nil // the stream was closed or forgotten: br was ended as lost
		}
		if br.users--; br.users > 0 {
			return nil
		}
		m.open = nil
		end, err := m.event(drv, ctx)
		if err == nil {
			if err = drv.EventRecord(ctx, end, s.h()); err != nil {
				m.free = append(m.free, end)
			}
		}
		if err != nil {
			m.free = append(m.free, br.start)
			br.lost()
			return err
		}
		m.pending = append(m.pending, timedLaunch{start: br.start, end: end, br: br})
		s.markBusy() // priority.go: a latency tenant's Do work in flight counts
		return nil
	})
}

// doStats adds Do's admission waits to s.
func (c *tenantCore) doStats(s *Stats) {
	if dm := c.dm.Load(); dm != nil && dm.bucket != nil {
		bs := dm.bucket.Stats()
		s.DoAdmitted, s.DoThrottled, s.DoThrottleWait = bs.Admitted, bs.Throttled, time.Duration(bs.WaitNanos)
		s.Throttled += bs.Throttled
		s.ThrottleWait += time.Duration(bs.WaitNanos)
	}
}

// TryDo is Do without waiting for GPU-share tokens: under WithGPUShare, if
// the tenant's bucket does not hold f's predicted cost now, it returns
// ErrThrottled, charging nothing and not running f. It still waits, as Do,
// for a partitioned tenant's exclusion (ctx ends that wait). Without a GPU
// share it is Do.
func (t *Tenant) TryDo(ctx context.Context, f func(Current) error) error {
	defer runtime.KeepAlive(t)
	return t.c.runDo(ctx, f, true)
}
