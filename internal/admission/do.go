package admission

import (
	"context"
	"errors"
	"sync"
	"unsafe"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// Metering and admission of Tenant.Do on a metered tenant.
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
// Under a GPU share, Do is admitted before f runs, charged a running
// estimate of its cost (the sum over its brackets of their time scaled by
// the stream's class factor), one refill period the first time, and the
// bucket is corrected by the difference once its brackets are measured.
// It takes the launches' charge path (charge.go), priced as work of the
// Default class.

// doMeter is a metered tenant's state for Do, made at its first Do.
type doMeter struct {
	t      *Tenant             // set once before sharing
	bucket *tokenbucket.Stream // set once before sharing; Do's admission (pricer.doStream); nil: Do is not limited
	// own lock; est maps a call site (f's code pointer) to the estimate of
	// its cost. The code pointer is the func literal's: every closure made
	// by one literal shares it, and one literal in a server is, in the
	// usual case, one kind of library work. It costs no allocation and no
	// help from the caller (BenchmarkDoKey). An explicit key would need an
	// API for a case the running estimate and the correction already
	// absorb.
	est  sync.Map                              // uintptr -> *Estimate
	mu   lockorder.Mutex[lockorder.AdmDoMeter] // protects the following field
	runs map[int]*Run                          // guarded by mu; OS thread inside a Do -> its run (a nested Do joins it)
}

func (t *Tenant) doMeter() (*doMeter, error) {
	if dm := t.dm.Load(); dm != nil {
		return dm, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if dm := t.dm.Load(); dm != nil {
		return dm, nil
	}
	b, err := t.price.doStream(t.cfg.Host)
	if err != nil {
		return nil, err
	}
	dm := &doMeter{t: t, bucket: b, runs: map[int]*Run{}}
	t.dm.Store(dm)
	return dm, nil
}

func (dm *doMeter) estimate(key uintptr) *Estimate {
	if v, ok := dm.est.Load(key); ok {
		return v.(*Estimate)
	}
	v, _ := dm.est.LoadOrStore(key, new(Estimate))
	return v.(*Estimate)
}

// Run is one metered call of Do. A nil *Run (an unmetered tenant's) does
// nothing.
type Run struct {
	gctx   cuda.Context // set once before sharing (Start); the context the Do made current on its thread: its events use it (no switch)
	dm     *doMeter     // set once before sharing; its tenant's
	est    *Estimate    // set once before sharing
	c      charge       // set once before sharing; what its admission took: settled once its brackets are measured
	thread int32        // set once before sharing; the OS thread it runs on (Start)
	q      float32      // set once before sharing; charged to the queue bound's prediction (queue.go), ns; 0: none
	lead   float64      // guarded by mu (BeginDo sets it first, before sharing); its lead there, kept less the corrections then (queue.go, own), ns

	mu     lockorder.Mutex[lockorder.AdmRun] // protects the following fields
	used   []bracketUse                      // guarded by mu; the streams f took, with the bracket each joined
	tokens float64                           // guarded by mu (the last done reads it without: no writer is left); measured so far, scaled by class
	left   int32                             // guarded by mu; brackets not yet measured, plus one until f returns
	gone   bool                              // guarded by mu (the last done reads it without, as tokens); a bracket was lost: neither learn nor correct
	ended  bool                              // guarded by mu; f has returned: no stream may be taken any more
	landed bool                              // guarded by mu; its admission's transit ended (land)
	// (136 bytes: a Run is made per metered Do.)
}

type bracketUse struct {
	m  *meter
	br *bracket
}

// bracket is a Do's interval on one stream, from the event recorded when f
// took the stream to the one recorded when the last Do in it returned.
type bracket struct {
	start cuda.Event // set once before sharing
	runs  []*Run     // guarded by meter.mu; the Dos that took the stream while it was open
	users int        // guarded by meter.mu; of them, those whose f has not returned
	inner float64    // guarded by meter.mu; ns of the SDK's timed launches queued inside
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
func (r *Run) done(tokens float64, lost bool) {
	r.mu.Lock()
	r.tokens += tokens
	r.gone = r.gone || lost
	r.left--
	last, lead := r.left == 0, r.lead
	r.mu.Unlock()
	if !last || r.gone {
		return
	}
	r.est.add(r.dm.t.settleQueue(float64(r.q), r.tokens, lead))
	r.c.settle(r.dm.bucket, r.tokens)
}

// BeginDo admits a Do of f (its code pointer keys the estimate) on a
// metered tenant (Metered) and returns its run. A Do nested in another on
// the same thread joins the outer run (admitted already) and own is false.
// With try it does not wait: ErrThrottled, charging nothing.
func (t *Tenant) BeginDo(ctx context.Context, key uintptr, try bool) (r *Run, own bool, err error) {
	dm, err := t.doMeter()
	if err != nil {
		return nil, false, err
	}
	dm.mu.Lock()
	if len(dm.runs) > 0 {
		// Only the goroutine locked to this thread can be here while a Do
		// runs on it: that Do is this goroutine's own.
		if outer := dm.runs[osthread.ID()]; outer != nil {
			dm.mu.Unlock()
			return outer, false, nil
		}
	}
	dm.mu.Unlock()
	r = &Run{dm: dm, est: dm.estimate(key), left: 1}
	how := await
	if try {
		how = now
	}
	// The queue bound (queue.go), before the tokens: a Do waiting for
	// room in the queue holds none.
	if h := t.horizon.Load(); h > 0 {
		q, lead, err := t.enqueue(ctx, h, r.est.get(), how, false)
		if err != nil {
			return nil, false, err
		}
		r.q, r.lead = float32(q), lead
	}
	if t.price.freeDo() {
		return r, true, nil // metered only
	}
	// Fold in what completed, so the estimate and the bucket are current.
	// A partition's streams are polled at the end of each Do instead
	// (pollAfter; as before the slots, when polling here would have waited
	// for the partition's one exclusion, deaf to ctx).
	if err := t.pollBefore(t); err != nil {
		t.dequeue(float64(r.q))
		return nil, false, err
	}
	if _, err := t.charge(ctx, how, dm.bucket, job{class: stream.Default, est: r.est}, &r.c); err != nil {
		t.dequeue(float64(r.q))
		return nil, false, err
	}
	return r, true, nil
}

// Start registers the run as the one on this (locked) thread, where ctx is
// current, and opens its brackets on the streams an earlier Do handed out
// (meter.bound), before f runs: a library queues on the handle it kept
// without asking Current again. A stream closed meanwhile is skipped.
func (r *Run) Start(thread int, ctx cuda.Context) error {
	r.thread, r.gctx = int32(thread), ctx
	r.dm.mu.Lock()
	r.dm.runs[thread] = r
	r.dm.mu.Unlock()
	for _, m := range r.dm.t.metered() {
		if !m.bound.Load() {
			continue
		}
		if err := r.take(m); err != nil && !(m.sclosed.Load() && errors.Is(err, errs.ErrClosed)) {
			return err
		}
	}
	return nil
}

// Abandon gives back the charge of a run whose f never ran.
func (r *Run) Abandon() {
	if r.c.total() > 0 {
		r.c.cancel(r.dm.bucket)
	}
	if r.q != 0 {
		r.dm.t.giveBack(float64(r.q))
	}
	r.land()
}

// land ends the run's admission's transit (Tenant.land), once: at its
// first bracket (the work in a meter), or where it ends or is abandoned
// with none (its charge settled or given back).
func (r *Run) land() {
	r.mu.Lock()
	first := !r.landed
	r.landed = true
	r.mu.Unlock()
	if first && r.q != 0 {
		r.dm.t.land()
	}
}

// Take opens, or joins, g's bracket for the run: called when f takes the
// stream's handle, on f's thread (the tenant's context current, its
// exclusion held). The stream is timed in every later Do too.
func (r *Run) Take(g *Gate) error {
	if r == nil {
		return nil // an unmetered tenant's Do
	}
	g.meter.bound.Store(true) // a metered tenant's streams are all metered
	return r.take(g.meter)
}

func (r *Run) take(m *meter) error {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return ErrTakenAfterDo
	}
	for _, u := range r.used {
		if u.m == m {
			r.mu.Unlock()
			return nil
		}
	}
	r.mu.Unlock()
	// With the Do's own context, current on this thread: pushing another
	// (the primary) would switch the thread's context twice per call.
	return m.t.doWith(r.gctx, func(ctx cuda.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		// Fold in what completed: a stream used only through Do has no
		// launch to do it, and its queue must not grow unread.
		if err := m.pollLocked(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		ended := r.ended
		r.mu.Unlock()
		if ended {
			return ErrTakenAfterDo // a bracket opened now would never close
		}
		br := m.open
		if br == nil {
			if len(m.pending) > 0 {
				r.mu.Lock()
				r.lead = behind // its start event waits for the stream's work ahead (own)
				r.mu.Unlock()
			}
			e, err := m.record(ctx)
			if err != nil {
				return err
			}
			br = &bracket{start: e}
			m.open = br
			m.markBusy() // f may be queuing work now
		}
		br.runs = append(br.runs, r)
		br.users++
		r.mu.Lock()
		r.used = append(r.used, bracketUse{m, br})
		r.left++
		r.mu.Unlock()
		r.land() // its bracket is open, which a look sees
		return nil
	})
}

// End closes the run's brackets once f has returned (still on f's thread),
// and unregisters the run. A bracket whose stream was closed meanwhile was
// ended as lost by that Close. An error matching ErrClosed is not
// reported.
func (r *Run) End() error {
	if r == nil {
		return nil
	}
	r.dm.mu.Lock()
	delete(r.dm.runs, int(r.thread))
	r.dm.mu.Unlock()
	r.mu.Lock()
	r.ended = true
	used := r.used
	r.mu.Unlock()
	var errList []error
	for _, u := range used {
		errList = append(errList, u.m.closeBracket(u.br, r.gctx))
	}
	r.done(0, false) // f returned
	r.land()         // where f took no stream: after its charge is settled (done), or a look between could reset the prediction with it in
	// A partition's streams are polled now (see BeginDo).
	if err := r.dm.t.pollAfter(r.dm.t); err != nil {
		errList = append(errList, err)
	}
	if err := errors.Join(errList...); err != nil && !errors.Is(err, errs.ErrClosed) {
		return err
	}
	return nil
}

// closeBracket ends one Do's use of br, recording its end event when it is
// the last.
func (m *meter) closeBracket(br *bracket, gctx cuda.Context) error {
	return m.t.doWith(gctx, func(ctx cuda.Context) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.open != br {
			return nil // the stream was closed or forgotten: br was ended as lost
		}
		if br.users--; br.users > 0 {
			return nil
		}
		m.open = nil
		end, err := m.record(ctx)
		if err != nil {
			m.free = append(m.free, br.start)
			br.lost()
			return err
		}
		m.pending = append(m.pending, timed{start: br.start, end: end, br: br})
		m.markBusy() // a latency tenant's Do work in flight counts
		return nil
	})
}

// FuncKey is what a Do's estimate is kept under: f's code, as
// reflect.Value.Pointer says of a func, read without making f an
// interface, which made every Do's closure escape to the heap (a request
// loop's garbage). f must not be nil.
func FuncKey[F any](f F) uintptr {
	return **(**uintptr)(unsafe.Pointer(&f))
}
