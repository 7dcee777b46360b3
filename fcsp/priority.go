package fcsp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Priority between tenants for what green contexts do not split: memory
// bandwidth (and L2, and the copy engines). A partition has SMs of its own,
// but its kernels read and write the same HBM as everyone else's: on the
// H200 a 16-SM triad ran at 808 GB/s alone and 548 GB/s beside a
// memory-bound neighbour on the other 116 SMs. A LatencyCritical tenant's
// work in flight holds its floored neighbours (WithBandwidthFloor) to a
// fraction of their GPU share, so they move less memory while it runs.
//
// "In flight" is known without waiting and without a polling thread: a
// per-pool count of LatencyCritical streams with metered work (launches,
// graphs, Do brackets) not yet seen complete, raised when it is queued and
// lowered when its end event is seen complete, by the stream's own poll
// (its next launch, Stats, its Synchronize) or by a floored neighbour's
// admission, which asks the driver with cuEventQuery (it never waits) while
// the count is raised.

// Priority is a tenant's rank for memory bandwidth.
type Priority int

const (
	// Normal tenants run as their limits say.
	Normal Priority = iota
	// LatencyCritical tenants hold their floored neighbours down while
	// they have work in flight. The tenant is metered (WithGPUMetering).
	// Its kernels launched through the SDK (Stream.Launch, TryLaunch, a
	// Reservation), its graph launches (LaunchGraph) and its work inside Do
	// on the streams Do times (see Current.Stream) count as in flight; work
	// on raw handles outside Do does not.
	LatencyCritical
)

func (p Priority) String() string {
	switch p {
	case Normal:
		return "normal"
	case LatencyCritical:
		return "latency-critical"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// priorityConfig is what WithPriority and WithBandwidthFloor asked for.
type priorityConfig struct {
	prio  Priority
	floor float64 // 0: none
	set   bool    // WithPriority was given
}

// checkPriority refuses contradictory priority options and turns on what
// they need: metering for a latency tenant, a GPU-time bucket for a
// floored one.
func (c *tenantConfig) checkPriority() error {
	switch {
	case c.prio.prio == LatencyCritical && c.prio.floor > 0:
		return fmt.Errorf("%w: WithBandwidthFloor on a LatencyCritical tenant; a floor is for the tenants that yield to it", ErrInvalidArgument)
	case c.prio.floor > 0 && c.smLimit > 0:
		return fmt.Errorf("%w: WithBandwidthFloor with WithSMLimit; a floor needs a GPU-time bucket: use WithGPUShare", ErrInvalidArgument)
	}
	if c.prio.prio == LatencyCritical {
		c.metered = true
	}
	if c.prio.floor > 0 && c.gpuShare == 0 {
		c.gpuShare, c.metered = 1, true
	}
	return nil
}

// tenantPriority is a tenant's part: its rank, floor and counters.
type tenantPriority struct {
	latency bool
	floor   float64
	floored atomic.Uint64 // launches admitted at the floor
	bytes   atomic.Uint64 // declared bytes of completed launches (bandwidth.go)
}

// poolPriority is the pool's part: which latency streams are busy.
type poolPriority struct {
	busy    atomic.Int64              // LatencyCritical streams with launches in flight
	mu      sync.Mutex                // serialises changes of streams
	streams atomic.Pointer[[]*Stream] // LatencyCritical metered streams (copy on write)
	query   atomic.Int32              // probe: may cuEventQuery run with no context current
	// idle is closed (and replaced) when busy falls to 0, waking launches
	// waiting at the floor to be admitted at their full share.
	idle atomic.Pointer[chan struct{}]
}

// idleChan is the channel the next fall of busy to 0 closes. Take it
// before looking at busy.
func (pp *poolPriority) idleChan() <-chan struct{} {
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

func (pp *poolPriority) wakeIdle() {
	c := make(chan struct{})
	if old := pp.idle.Swap(&c); old != nil {
		close(*old)
	}
}

// add lists s, a metered stream of a LatencyCritical tenant.
func (pp *poolPriority) add(s *Stream) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var next []*Stream
	if cur := pp.streams.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, s)
	pp.streams.Store(&next)
}

func (pp *poolPriority) remove(s *Stream) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	cur := pp.streams.Load()
	if cur == nil {
		return
	}
	next := make([]*Stream, 0, len(*cur))
	for _, x := range *cur {
		if x != s {
			next = append(next, x)
		}
	}
	pp.streams.Store(&next)
}

// LatencyBusy reports whether a LatencyCritical tenant of the pool has
// kernels in flight, as last seen (it asks the driver nothing).
func (p *Pool) LatencyBusy() bool { return p.prio.busy.Load() > 0 }

// markBusy counts s as busy after a launch was queued on it. Called with
// s.meter.mu held.
func (s *Stream) markBusy() {
	if m := s.meter; s.t.prio.latency && !m.busy {
		m.busy = true
		s.t.pool.prio.busy.Add(1)
	}
}

// markIdle uncounts s. Called with s.meter.mu held, once its launches are
// all known complete (or forgotten).
func (s *Stream) markIdle() {
	if m := s.meter; m.busy {
		m.busy = false
		if pp := &s.t.pool.prio; pp.busy.Add(-1) == 0 {
			pp.wakeIdle()
		}
	}
}

// afterSync folds a latency stream's completed launches in after its
// Synchronize, so its neighbours are released at once rather than at its
// next launch.
func (s *Stream) afterSync() {
	if s.meter != nil && s.t.prio.latency {
		_ = s.t.do(s.poll)
	}
}

// refresh asks the driver, without waiting, whether the busy latency
// streams' last launches have completed, and uncounts those that have. It
// takes no lock it could wait for: a stream whose meter is in use (its
// owner launching or polling: it will see for itself) is skipped.
func (pp *poolPriority) refresh(p *Pool) {
	if pp.query.Load() == probeNo {
		return
	}
	list := pp.streams.Load()
	if list == nil {
		return
	}
	for _, s := range *list {
		m := s.meter
		if !m.mu.TryLock() {
			continue
		}
		if m.busy && m.open == nil { // an open Do bracket: f may be queuing work
			if n := len(m.pending); n == 0 {
				s.markIdle()
			} else if pp.queryDone(p, s, m.pending[n-1].end) {
				// Stream order: the last launch done means all are. Their
				// times are folded in by the owner's next poll.
				s.markIdle()
			}
		}
		m.mu.Unlock()
	}
}

// queryDone reports whether e (of s's tenant) has completed. It asks with
// no context current (a green context may be current on one thread at a
// time, and its owner may hold it): the first answer tells whether the
// driver accepts that, and if it does not, neighbours stop asking.
func (pp *poolPriority) queryDone(p *Pool, s *Stream, e cuda.Event) bool {
	ctx := s.t.place.anyThread() // 0 for a partition's: none current
	err := p.drv.EventQuery(ctx, e)
	switch {
	case err == nil:
		if ctx == 0 {
			pp.query.CompareAndSwap(probeUnknown, probeYes)
		}
		return true
	case errors.Is(err, cuda.ErrorNotReady):
		if ctx == 0 {
			pp.query.CompareAndSwap(probeUnknown, probeYes)
		}
	case ctx == 0 && (errors.Is(err, cuda.ErrorInvalidContext) || errors.Is(err, cuda.ErrorInvalidHandle)):
		if pp.query.CompareAndSwap(probeUnknown, probeNo) {
			p.log.Info("driver needs a current context for cuEventQuery; latency tenants are seen idle at their own polls only")
		}
	}
	return false
}

// admitLaunchFloored is admitLaunch for a tenant with a floor: while a
// latency tenant is busy the launch is charged its surcharge besides, and
// a launch waiting at the floor when the latency tenants go idle is woken
// and admitted at its full share. It returns what it charged: the cost
// (corrected when the launch is measured) and the surcharge (not).
func (s *Stream) admitLaunchFloored(ctx context.Context, f *Function, grid, block Dim3) (charged, extra float64, err error) {
	if s.t.prio.floor == 0 {
		charged, err = s.admitLaunch(ctx, f, grid, block)
		return charged, 0, err
	}
	// Evaluated again whenever a change of share wakes the waiter; the
	// last evaluation is what was charged.
	cost := func() float64 {
		charged = s.cost(f, grid, block)
		extra = s.floorSurcharge(f, grid, block, charged)
		return charged + extra
	}
	pp := &s.t.pool.prio
	idle := pp.idleChan() // before cost looks at busy: a fall to 0 after this closes it
	if total := cost(); extra == 0 {
		_, err = s.admitCost(ctx, cost)
		return charged, extra, err
	} else if s.bucket.TryAcquire(total) { // no wait: no watcher needed
		return charged, extra, nil
	}
	woken, err := untilIdle(ctx, idle, func(wctx context.Context) error {
		_, err := s.admitCost(wctx, cost)
		return err
	})
	if woken {
		charged, err = s.admitLaunch(ctx, f, grid, block) // woken by the latency tenants' idling
		return charged, 0, err
	}
	return charged, extra, err
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

// floorSurcharge is floorExtra for a launch of f on s, base being its cost
// at the tenant's share; its prediction is the kernel's estimate (a whole
// refill period before the first measurement), scaled by the stream's class.
func (s *Stream) floorSurcharge(f *Function, grid, block Dim3, base float64) float64 {
	c := s.t
	if c.prio.floor == 0 || s.bucket == nil {
		return 0
	}
	return c.floorExtra(base, func() float64 {
		ns := f.estimateFor(grid, block).get()
		if ns == 0 {
			ns = float64(c.limiter.Capacity())
		}
		return ns * s.class.ThrottleScale()
	})
}
