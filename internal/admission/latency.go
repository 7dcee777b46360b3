package admission

import (
	"errors"
	"slices"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
)

// The latency-stream count fcsp/priority.go describes: a LatencyCritical
// stream's meter counts itself busy on its Pool when work is queued on it
// (markBusy), and idle when its poll sees that work complete (markIdle),
// or when a floored neighbour's admission asks the driver (Refresh).

// What Pool.query holds: whether cuEventQuery may run with no context
// current.
const (
	queryUnknown int32 = iota
	queryYes
	queryNo
)

// Pool is the pool's part of admission: which latency streams are busy,
// and the engine its plain tenants share. The zero Pool is ready.
type Pool struct {
	busy    atomic.Int64                       // atomic; LatencyCritical streams with work in flight
	mu      lockorder.Mutex[lockorder.AdmPool] // serialises changes of streams
	streams atomic.Pointer[[]*meter]           // atomic; written under mu: LatencyCritical streams' meters (copy on write)
	query   atomic.Int32                       // atomic; probe: may cuEventQuery run with no context current
	// atomic; idle is closed (and dropped) when busy falls to 0, waking
	// launches waiting at the floor to be admitted at their full share;
	// made by the first to wait on it (idleChan).
	idle atomic.Pointer[chan struct{}]
	// atomic; plain is the engine every plain tenant shares (Config.Plain).
	plain atomic.Pointer[Tenant]
}

// LatencyBusy reports whether a LatencyCritical tenant of the pool has
// work in flight, as last seen (it asks the driver nothing).
func (pp *Pool) LatencyBusy() bool { return pp.busy.Load() > 0 }

// Busy is how many latency streams have work in flight, as last seen.
func (pp *Pool) Busy() int64 { return pp.busy.Load() }

// idleChan is the channel the next fall of busy to 0 closes. Take it
// before looking at busy.
func (pp *Pool) idleChan() <-chan struct{} {
	for {
		if c := pp.idle.Load(); c != nil {
			return *c
		}
		c := make(chan struct{})
		if pp.idle.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// wakeIdle closes the channel idleChan gave out, if any. A channel is
// made only for a wait at the floor: a latency stream going idle, once per
// launch it waits for, made one for nobody before.
func (pp *Pool) wakeIdle() {
	if old := pp.idle.Swap(nil); old != nil {
		close(*old)
	}
}

func (pp *Pool) add(m *meter) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var next []*meter
	if cur := pp.streams.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, m)
	pp.streams.Store(&next)
}

// remove takes m off the list, if it is on it.
func (pp *Pool) remove(m *meter) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	cur := pp.streams.Load()
	if cur == nil || !slices.Contains(*cur, m) {
		return
	}
	next := make([]*meter, 0, len(*cur))
	for _, x := range *cur {
		if x != m {
			next = append(next, x)
		}
	}
	pp.streams.Store(&next)
}

// markBusy counts m as busy after work was queued on it, if it is a
// latency stream's. Called with m.mu held.
func (m *meter) markBusy() {
	if m.lat != nil && !m.busy {
		m.busy = true
		m.lat.busy.Add(1)
	}
}

// markIdle uncounts m. Called with m.mu held, once its work is all known
// complete (or forgotten).
func (m *meter) markIdle() {
	if m.busy {
		m.busy = false
		pp := m.lat // busy: a latency stream's
		if pp.busy.Add(-1) == 0 {
			pp.wakeIdle()
		}
	}
}

// Refresh asks the driver, without waiting, whether the busy latency
// streams' last work has completed, and uncounts those that have. It takes
// no lock it could wait for: a stream whose meter is in use (its owner
// launching or polling: it will see for itself) is skipped.
func (pp *Pool) Refresh() {
	if pp.query.Load() == queryNo {
		return
	}
	list := pp.streams.Load()
	if list == nil {
		return
	}
	for _, m := range *list {
		if !m.mu.TryLock() {
			continue
		}
		if m.busy && m.open == nil { // an open Do bracket: f may be queuing work
			if n := len(m.pending); n == 0 {
				m.markIdle()
			} else if pp.queryDone(m, m.pending[n-1].end) {
				// Stream order: the last launch done means all are. Their
				// times are folded in by the owner's next poll.
				m.markIdle()
			}
		}
		m.mu.Unlock()
	}
}

// queryDone reports whether e (of m's tenant) has completed. It asks with
// no context current (a green context may be current on one thread at a
// time, and its owner may hold it): the first answer tells whether the
// driver accepts that, and if it does not, neighbours stop asking.
func (pp *Pool) queryDone(m *meter, e cuda.Event) bool {
	cfg := &m.t.cfg
	ctx := cfg.AnyThread() // 0 for a partition's: none current
	err := cfg.Events.EventQuery(ctx, e)
	switch {
	case err == nil:
		if ctx == 0 {
			pp.query.CompareAndSwap(queryUnknown, queryYes)
		}
		return true
	case errors.Is(err, cuda.ErrorNotReady):
		if ctx == 0 {
			pp.query.CompareAndSwap(queryUnknown, queryYes)
		}
	case ctx == 0 && (errors.Is(err, cuda.ErrorInvalidContext) || errors.Is(err, cuda.ErrorInvalidHandle)):
		if pp.query.CompareAndSwap(queryUnknown, queryNo) {
			cfg.Log("driver needs a current context for cuEventQuery; latency tenants are seen idle at their own polls only")
		}
	}
	return false
}
