package admission

import (
	"errors"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// GPU-time metering: a metered stream records an event before and after
// each launch and reads them back lazily (cuEventQuery, which never waits)
// when the stream next launches or Stats is asked, so nothing on the launch
// path waits for the GPU. Completed launches add their GPU time to the
// stream's tenant (per class), update their kernel's running estimate and,
// under a GPU share, correct the bucket by the difference between the
// estimate charged and the time measured (charge.settle).

// meter is a metered stream's work in flight, timed by events. It is made
// with its stream's gate, and holds what its polls need of the stream: a
// poll may come from the tenant (Poll, Stats) or a Do (Run.Start).
type meter struct {
	t       *Tenant             // set once before sharing
	class   stream.Class        // set once before sharing
	hv      *atomic.Uintptr     // set once before sharing; the stream's CUstream (a Reshape swaps it)
	sclosed *atomic.Bool        // set once before sharing; the stream's Close began
	bucket  *tokenbucket.Stream // set once before sharing; what its charges are settled on; nil: not limited
	lat     *Pool               // set once before sharing; a LatencyCritical stream's pool, which counts it busy (latency.go); nil: not counted
	// atomic; bound: a Do took the handle (Current.Stream), so a library
	// may hold it and queue on it in any later Do: every later Do times
	// it.
	bound atomic.Bool

	mu      lockorder.Mutex[lockorder.AdmMeter] // protects the following fields but gpu (atomic)
	free    []cuda.Event                        // guarded by mu; events done with, for reuse
	pending []timed                             // guarded by mu; in stream order
	gpu     atomic.Int64                        // atomic; ns of completed work (added under mu)
	open    *bracket                            // guarded by mu; the Do bracket open on the stream, if any (do.go)
	closed  bool                                // guarded by mu; close ran: no event is made any more
	busy    bool                                // guarded by mu; counted in its pool's busy latency streams (latency.go)
	bw      bandwidthAccount                    // guarded by mu; recent launches' bandwidth figures (bandwidth.go)
}

// timed is work queued between two events, not yet seen complete.
type timed struct {
	// guarded by meter.mu: a timed lives in its meter's pending list.
	start, end cuda.Event
	est        *Estimate
	c          charge   // what it was charged: settled by the measurement
	in         *bracket // the Do bracket open when it was queued: its time is not the Do's
	br         *bracket // non-nil: this is that Do bracket's own entry (est, c unused)
	bytes      uint64   // declared bytes moved (bandwidth.go)
	q          float64  // charged to the queue bound's prediction (queue.go), corrected when measured; 0: none
	lead       float64  // its lead there, kept less the corrections then (queue.go, own)
}

func (m *meter) h() cuda.Stream { return cuda.Stream(m.hv.Load()) }

// event takes an event from the free list or makes one.
func (m *meter) event(ctx cuda.Context) (cuda.Event, error) {
	if m.closed {
		// A Do that listed the stream before its Close took the meter
		// after it: an event made now would outlive the stream.
		return 0, errs.ErrClosed
	}
	if n := len(m.free); n > 0 {
		e := m.free[n-1]
		m.free = m.free[:n-1]
		return e, nil
	}
	return m.t.cfg.Events.EventCreate(ctx, cuda.EventDefault)
}

// record takes an event (event) and records it on the stream; one the
// driver refuses to record goes back to the free list. The caller holds
// m.mu.
func (m *meter) record(ctx cuda.Context) (cuda.Event, error) {
	e, err := m.event(ctx)
	if err != nil {
		return 0, err
	}
	if err := m.t.cfg.Events.EventRecord(ctx, e, m.h()); err != nil {
		m.free = append(m.free, e)
		return 0, err
	}
	return e, nil
}

// poll folds the work whose events completed into the accounts, oldest
// first, stopping at the first not yet complete. It never waits.
func (m *meter) poll(ctx cuda.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pollLocked(ctx)
}

func (m *meter) pollLocked(ctx cuda.Context) error {
	ev, t := m.t.cfg.Events, m.t
	done := 0
	defer func() {
		// A queue only resliced from the front reallocates on every
		// append (one allocation per metered launch): once at least half
		// of it is done, move what is left to the front instead, keeping
		// the capacity (amortised O(1) copying per launch).
		if left := len(m.pending) - done; done > 0 && done >= left {
			n := copy(m.pending, m.pending[done:])
			clear(m.pending[n:])
			m.pending = m.pending[:n]
		} else {
			m.pending = m.pending[done:]
		}
		if len(m.pending) == 0 && m.open == nil { // an open Do bracket: f may be queuing work
			m.markIdle()
		}
	}()
	for _, p := range m.pending {
		if err := ev.EventQuery(ctx, p.end); err != nil {
			if errors.Is(err, cuda.ErrorNotReady) {
				return nil
			}
			return err
		}
		ms, err := ev.EventElapsedMs(ctx, p.start, p.end)
		if err != nil {
			return err
		}
		ns := float64(ms) * 1e6
		if p.br != nil {
			// A Do's bracket: its own time is what the SDK's launches
			// queued inside it (folded in before it, in stream order) did
			// not take, so nothing is counted twice.
			own := max(ns-p.br.inner, 0)
			m.gpu.Add(int64(own))
			t.gpu[m.class].Add(int64(own))
			p.br.measured(own * m.class.ThrottleScale())
			m.free = append(m.free, p.start, p.end)
			done++
			continue
		}
		if p.in != nil {
			p.in.inner += ns
		}
		m.gpu.Add(int64(ns))
		t.gpu[m.class].Add(int64(ns))
		p.est.add(t.settleQueue(p.q, ns, p.lead))
		m.bw.observe(p.est, p.bytes, ns, &t.bytes)
		// Launches admitted free (share 1, NCCL) are not limited, so
		// there is nothing to correct.
		p.c.settle(m.bucket, ns*m.class.ThrottleScale())
		m.free = append(m.free, p.start, p.end)
		done++
	}
	return nil
}

// close folds in what completed (the stream was synchronised) and
// destroys the stream's events; the meter goes off its tenant's list and
// its pool's.
func (m *meter) close(ctx cuda.Context) error {
	t := m.t
	t.listMeter(m, false)
	t.pool.remove(m)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	errs := []error{m.pollLocked(ctx)}
	for _, p := range m.pending {
		m.free = append(m.free, p.start, p.end)
		if p.br != nil {
			p.br.lost()
		}
	}
	m.pending = nil
	if b := m.open; b != nil { // closed inside a Do: its bracket ends unmeasured
		m.free = append(m.free, b.start)
		m.open = nil
		b.lost()
	}
	m.markIdle()
	for _, e := range m.free {
		errs = append(errs, t.cfg.Events.EventDestroy(ctx, e))
	}
	m.free = nil
	return errors.Join(errs...)
}
