package admission

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// Priority between tenants for what green contexts do not split: memory
// bandwidth (and L2, and the copy engines). A LatencyCritical tenant's
// work in flight holds its floored neighbours to a fraction of their GPU
// share, so they move less memory while it runs.
//
// "In flight" is known without waiting and without a polling thread: a
// per-pool count of LatencyCritical streams with metered work (launches,
// graphs, Do brackets) not yet seen complete, raised when it is queued and
// lowered when its end event is seen complete, by the stream's own poll
// (its next launch, Stats, its Synchronize) or by a floored neighbour's
// admission, which asks the driver with cuEventQuery (it never waits) while
// the count is raised.

// What Pool.query holds: whether cuEventQuery may run with no context
// current.
const (
	queryUnknown int32 = iota
	queryYes
	queryNo
)

// Pool is the pool's part of priority: which latency streams are busy.
// The zero Pool is ready.
type Pool struct {
	busy    atomic.Int64            // LatencyCritical streams with work in flight
	mu      sync.Mutex              // serialises changes of streams
	streams atomic.Pointer[[]*Gate] // LatencyCritical metered streams (copy on write)
	query   atomic.Int32            // probe: may cuEventQuery run with no context current
	// idle is closed (and replaced) when busy falls to 0, waking launches
	// waiting at the floor to be admitted at their full share.
	idle atomic.Pointer[chan struct{}]
	// plain is the engine every plain tenant shares (Config.Plain).
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

func (pp *Pool) wakeIdle() {
	c := make(chan struct{})
	if old := pp.idle.Swap(&c); old != nil {
		close(*old)
	}
}

func (pp *Pool) add(g *Gate) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var next []*Gate
	if cur := pp.streams.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, g)
	pp.streams.Store(&next)
}

func (pp *Pool) remove(g *Gate) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	cur := pp.streams.Load()
	if cur == nil {
		return
	}
	next := make([]*Gate, 0, len(*cur))
	for _, x := range *cur {
		if x != g {
			next = append(next, x)
		}
	}
	pp.streams.Store(&next)
}

// markBusy counts g as busy after work was queued on it. Called with
// g.meter.mu held.
func (g *Gate) markBusy() {
	if m := g.meter; g.t.cfg.Latency && !m.busy {
		m.busy = true
		g.t.pool.busy.Add(1)
	}
}

// markIdle uncounts g. Called with g.meter.mu held, once its work is all
// known complete (or forgotten).
func (g *Gate) markIdle() {
	if m := g.meter; m.busy {
		m.busy = false
		if pp := g.t.pool; pp.busy.Add(-1) == 0 {
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
	for _, g := range *list {
		m := g.meter
		if !m.mu.TryLock() {
			continue
		}
		if m.busy && m.open == nil { // an open Do bracket: f may be queuing work
			if n := len(m.pending); n == 0 {
				g.markIdle()
			} else if pp.queryDone(g, m.pending[n-1].end) {
				// Stream order: the last launch done means all are. Their
				// times are folded in by the owner's next poll.
				g.markIdle()
			}
		}
		m.mu.Unlock()
	}
}

// queryDone reports whether e (of g's tenant) has completed. It asks with
// no context current (a green context may be current on one thread at a
// time, and its owner may hold it): the first answer tells whether the
// driver accepts that, and if it does not, neighbours stop asking.
func (pp *Pool) queryDone(g *Gate, e cuda.Event) bool {
	ctx := g.t.cfg.AnyThread() // 0 for a partition's: none current
	err := g.t.cfg.Events.EventQuery(ctx, e)
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
			g.t.cfg.Log("driver needs a current context for cuEventQuery; latency tenants are seen idle at their own polls only")
		}
	}
	return false
}

// admitFloored admits a launch of w, waiting: for a tenant with a floor,
// while a latency tenant is busy the launch is charged its surcharge
// besides, and a launch waiting at the floor when the latency tenants go
// idle is woken and admitted at its full share. It returns what it
// charged: the cost (corrected when the launch is measured) and the
// surcharge (not). The cost depends on the share (a GPU share's is 0 at
// share 1, the launch-rate model's throttle penalty falls as the limit
// rises), so a launch waiting when SetSMLimit changes it prices itself
// again instead of waiting out the old share's price.
func (g *Gate) admitFloored(ctx context.Context, w *Work) (charged, extra float64, err error) {
	if g.t.cfg.Floor == 0 {
		charged, err = g.bucket.WaitCost(ctx, func() float64 { return g.cost(w) })
		return charged, 0, closedErr(err)
	}
	// Evaluated again whenever a change of share wakes the waiter; the
	// last evaluation is what was charged.
	cost := func() float64 {
		charged = g.cost(w)
		extra = g.floorSurcharge(w, charged)
		return charged + extra
	}
	total, err := g.t.waitFloored(ctx, g.bucket, cost, &extra)
	if err != nil {
		return 0, 0, closedErr(err)
	}
	return total - extra, extra, nil
}

// floorSurcharge is floorExtra for a launch of w, base being its cost at
// the tenant's share.
func (g *Gate) floorSurcharge(w *Work, base float64) float64 {
	if g.t.cfg.Floor == 0 || g.bucket == nil {
		return 0
	}
	return g.t.floorExtra(base, func() float64 { return g.predicted(w.estimate()) })
}

// floorExtra is what work costing base tokens at the tenant's share (0 at
// share 1) costs beyond that while a latency tenant is busy: the work is
// then charged its predicted GPU time / floor in all. predicted is asked
// only then (the floored path alone pays for the estimate). 0 for a tenant
// without a floor or while no latency tenant is busy.
func (t *Tenant) floorExtra(base float64, predicted func() float64) float64 {
	if t.cfg.Floor == 0 {
		return 0
	}
	pp := t.pool
	if pp.busy.Load() == 0 {
		return 0
	}
	pp.Refresh()
	if pp.busy.Load() == 0 {
		return 0
	}
	full := base
	if full == 0 { // share 1 is admitted free: price it as a share below 1 is
		full = predicted()
	}
	return full/t.cfg.Floor - base
}

// waitFloored is b.WaitCost for a tenant that may have a floor: cost sets
// *extra (its surcharge) on each evaluation, and a wait at the floor ends
// when the latency tenants go idle, the work then admitted at the full
// share. It returns the total charged.
func (t *Tenant) waitFloored(ctx context.Context, b *tokenbucket.Stream, cost func() float64, extra *float64) (float64, error) {
	if t.cfg.Floor == 0 {
		return b.WaitCost(ctx, cost)
	}
	idle := t.pool.idleChan() // before cost looks at busy: a fall to 0 after this closes it
	if total := cost(); *extra == 0 {
		return b.WaitCost(ctx, cost)
	} else if b.TryAcquire(total) { // no wait: no watcher needed
		return total, nil
	}
	var total float64
	woken, err := untilIdle(ctx, idle, func(wctx context.Context) (err error) {
		total, err = b.WaitCost(wctx, cost)
		return err
	})
	if woken {
		return b.WaitCost(ctx, cost) // the latency tenants went idle: evaluated again
	}
	return total, err
}

// untilIdle runs wait under a context that also ends when idle closes (the
// pool's latency tenants went idle). woken says it ended for that reason
// and not ctx's: the caller then evaluates its admission again, at its full
// share.
func untilIdle(ctx context.Context, idle <-chan struct{}, wait func(context.Context) error) (woken bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-idle:
			cancel()
		case <-stop:
		}
	}()
	err = wait(wctx)
	return errors.Is(err, context.Canceled) && ctx.Err() == nil, err
}

// Bandwidth visibility, from the GPU time a metered tenant measures
// anyway: achieved bandwidth for kernels whose bytes per launch are
// declared, and slowdown (per kernel shape, the running estimate over the
// lowest it has been, averaged over recent launches weighted by GPU time).

// BandwidthWindow is how much of a stream's GPU time "recent" spans: older
// launches' weight decays as exp(-t/BandwidthWindow).
const BandwidthWindow = 100 * time.Millisecond

// bandwidthAccount is a stream's decayed sums (under its meter's lock).
type bandwidthAccount struct {
	weight  float64 // GPU ns of recent launches
	slowSum float64 // their ns x (estimate / lowest estimate)
	byteNs  float64 // GPU ns of recent launches with declared bytes
	bytes   float64 // their bytes
}

// lowest lowers e's best to its current estimate if that is lower, and
// returns the best.
func (e *Estimate) lowest() float64 {
	cur := e.ns.Load()
	for {
		b := e.best.Load()
		if b != 0 && math.Float64frombits(b) <= math.Float64frombits(cur) {
			return math.Float64frombits(b)
		}
		if e.best.CompareAndSwap(b, cur) {
			return math.Float64frombits(cur)
		}
	}
}

// observe folds a completed launch of ns GPU nanoseconds into g's
// bandwidth account. Called with g.meter.mu held, after p.est.add.
func (g *Gate) observe(p *timed, ns float64) {
	a := &g.meter.bw
	d := math.Exp(-ns / float64(BandwidthWindow))
	a.weight, a.slowSum, a.byteNs, a.bytes = a.weight*d, a.slowSum*d, a.byteNs*d, a.bytes*d
	if best := p.est.lowest(); best > 0 {
		a.weight += ns
		a.slowSum += ns * p.est.get() / best
	}
	if p.bytes > 0 {
		a.byteNs += ns
		a.bytes += float64(p.bytes)
		g.t.bytes.Add(p.bytes)
	}
}
