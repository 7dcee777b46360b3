package fcsp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// GPU-time metering: a metered stream records an event before and after
// each launch and reads them back lazily (cuEventQuery, which never waits)
// when the stream next launches or Stats is asked, so nothing on the launch
// path waits for the GPU. Completed launches add their GPU time to the
// stream's tenant (per class), update their kernel's running estimate and,
// under WithGPUShare, correct the bucket by the difference between the
// estimate charged and the time measured.

// ewmaWeight is the weight of a new measurement in a kernel's estimate.
const ewmaWeight = 0.25

// withClock makes the tenant's limiter read clock (tests).
func withClock(clock func() int64) TenantOption {
	return func(c *tenantConfig) error { c.clock = clock; return nil }
}

// gpuShareLimiter is a limiter whose tokens are nanoseconds of GPU time.
func gpuShareLimiter(f float64, refill time.Duration, clock func() int64) (*tokenbucket.Limiter, error) {
	if refill == 0 {
		refill = tokenbucket.DefaultRefillPeriod
	}
	return tokenbucket.New(tokenbucket.Config{
		SMs: 1, ThreadsPerSM: int(refill.Nanoseconds()), SMLimit: f, RefillPeriod: refill,
		Dampening: 1, Penalty: tokenbucket.NoPenalty, Clock: clock,
	})
}

// estimate is a running average of one kernel shape's GPU time, in ns
// (float64 bits; 0: not measured yet).
type estimate struct {
	ns   atomic.Uint64
	best atomic.Uint64 // lowest ns has been (bandwidth.go)
}

func (e *estimate) get() float64 { return math.Float64frombits(e.ns.Load()) }

func (e *estimate) add(ns float64) {
	ns = max(ns, 1) // measured, if at 0 ns: distinct from "not measured yet"
	for {
		old := e.ns.Load()
		v := ns
		if old != 0 {
			v = math.Float64frombits(old)*(1-ewmaWeight) + ns*ewmaWeight
		}
		if e.ns.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// estimateFor is f's estimate for launches of grid x block. The shape
// last asked for is found without the map (a map key boxed into an
// interface allocates: one allocation per metered launch otherwise).
func (f *Function) estimateFor(grid, block Dim3) *estimate {
	key := [6]uint32{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z}
	if l := f.lastEst.Load(); l != nil && l.key == key {
		return l.e
	}
	var e *estimate
	if v, ok := f.est.Load(key); ok {
		e = v.(*estimate)
	} else {
		v, _ := f.est.LoadOrStore(key, new(estimate))
		e = v.(*estimate)
	}
	f.lastEst.Store(&shapeEstimate{key: key, e: e})
	return e
}

// shapeEstimate is a Function's last looked-up estimate and its shape.
type shapeEstimate struct {
	key [6]uint32
	e   *estimate
}

// meter is a stream's launches in flight, timed by events.
type meter struct {
	mu      sync.Mutex
	free    []cuda.Event
	pending []timedLaunch // in stream order
	gpu     atomic.Int64  // ns of completed launches
	open    *bracket      // the Do bracket open on the stream, if any (dometer.go)
	closed  bool          // closeMeter ran: no event is made any more

	busy bool             // counted in the pool's busy latency streams (priority.go)
	bw   bandwidthAccount // recent launches' bandwidth figures (bandwidth.go)
}

type timedLaunch struct {
	start, end cuda.Event
	est        *estimate
	charged    float64          // tokens charged at admission (GPU share), else 0
	mark       tokenbucket.Mark // the bucket's parameters just before that charge
	in         *bracket         // the Do bracket open when it was queued: its time is not the Do's
	br         *bracket         // non-nil: this is that Do bracket's own entry (est, charged unused)
	bytes      uint64           // declared bytes moved (bandwidth.go)
}

// gpuCost is what a launch of f costs under a GPU share: the predicted run
// time, scaled by the stream's class. At share 1 it is 0, admitted without
// touching the buckets: a share of the whole device is no limit, and a
// bucket charged at submission for time the GPU spends later would hold a
// full-share tenant back by the work it has queued (on the H200 a 1 ms
// kernel at share 1 left the GPU 11% idle after each Synchronize, while the
// bucket refilled the debt of what had been queued).
func (s *Stream) gpuCost(f *Function, grid, block Dim3) float64 {
	if s.t.limiter.SMLimit() >= 1 {
		return 0
	}
	ns := f.estimateFor(grid, block).get()
	if ns == 0 {
		ns = float64(s.t.limiter.Capacity()) // conservative: a whole refill period
	}
	return ns * s.class.ThrottleScale()
}

// poll folds the launches whose events completed into the accounts,
// oldest first, stopping at the first not yet complete. It never waits.
func (s *Stream) poll(ctx cuda.Context) error {
	m := s.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.pollLocked(ctx)
}

func (s *Stream) pollLocked(ctx cuda.Context) error {
	m, drv := s.meter, s.t.pool.drv
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
			s.markIdle() // priority.go
		}
	}()
	for _, p := range m.pending {
		if err := drv.EventQuery(ctx, p.end); err != nil {
			if errors.Is(err, cuda.ErrorNotReady) {
				return nil
			}
			return err
		}
		ms, err := drv.EventElapsedMs(ctx, p.start, p.end)
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
			s.t.gpuByClass[s.class].Add(int64(own))
			p.br.measured(own * s.class.ThrottleScale())
			m.free = append(m.free, p.start, p.end)
			done++
			continue
		}
		if p.in != nil {
			p.in.inner += ns
		}
		m.gpu.Add(int64(ns))
		s.t.gpuByClass[s.class].Add(int64(ns))
		p.est.add(ns)
		s.observe(&p, ns) // bandwidth.go
		if s.t.gpuShare && s.bucket != nil && p.charged > 0 {
			// Launches admitted free (share 1, NCCL) are not limited, so
			// there is nothing to correct.
			// Settled at the worth of the charge: a share lowered
			// since scales what is given back as it scaled the tokens
			// in hand.
			s.bucket.AdjustSince(ns*s.class.ThrottleScale()-p.charged, p.mark)
		}
		m.free = append(m.free, p.start, p.end)
		done++
	}
	return nil
}

// event takes an event from the free list or makes one.
func (m *meter) event(drv cuda.Driver, ctx cuda.Context) (cuda.Event, error) {
	if m.closed {
		// A Do that listed the stream before its Close took the meter
		// after it: an event made now would outlive the stream.
		return 0, ErrClosed
	}
	if n := len(m.free); n > 0 {
		e := m.free[n-1]
		m.free = m.free[:n-1]
		return e, nil
	}
	return drv.EventCreate(ctx, cuda.EventDefault)
}

// launchTimed queues an admitted launch between two events; charged is
// what its admission charged, after mark.
func (s *Stream) launchTimed(f *Function, grid, block Dim3, shmem uint32, args *Args, charged float64, mark tokenbucket.Mark) error {
	c := s.t
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.exit(slot)
	return s.launchTimedLocked(f, grid, block, shmem, args, charged, mark)
}

// launchTimedLocked is launchTimed for a caller in the life lock, which
// must not enter it again: a Reshape between the two entries would wait
// for the first while the second waited at its gate.
func (s *Stream) launchTimedLocked(f *Function, grid, block Dim3, shmem uint32, args *Args, charged float64, mark tokenbucket.Mark) error {
	c := s.t
	// The events are recorded with the primary context, which serves every
	// green stream (docs/CONTEXTS.md): no green context is taken.
	if err := s.recordTimed(c.pool.dev.Primary(), f, grid, block, shmem, args, charged, mark); err != nil {
		if s.t.gpuShare && s.bucket != nil && charged > 0 {
			s.bucket.AdjustSince(-charged, mark) // nothing ran
		}
		return fmt.Errorf("tenant %q: launching %q: %w", s.t.name, f.name, err)
	}
	s.launches.Add(1)
	return nil
}

// recordTimed queues a launch between two events in ctx, under the meter's
// lock.
func (s *Stream) recordTimed(ctx cuda.Context, f *Function, grid, block Dim3, shmem uint32, args *Args, charged float64, mark tokenbucket.Mark) error {
	return s.queueTimed(ctx, f.estimateFor(grid, block), charged, mark, f.bytes.Load(), func() error {
		return s.t.pool.drv.LaunchKernel(ctx, f.handle(), grid.cuda(), block.cuda(), shmem, s.h(), &args.a)
	})
}

// queueTimed queues the work launch queues (a kernel, a graph) between two
// events in ctx, under the meter's lock; est learns its measured time, the
// bucket is corrected by the difference from charged (charged after mark),
// and bytes (declared bytes moved, 0: none) go to its bandwidth account.
func (s *Stream) queueTimed(ctx cuda.Context, est *estimate, charged float64, mark tokenbucket.Mark, bytes uint64, launch func() error) error {
	m, drv := s.meter, s.t.pool.drv
	m.mu.Lock()
	defer m.mu.Unlock()
	start, err := m.event(drv, ctx)
	if err != nil {
		return err
	}
	end, err := m.event(drv, ctx)
	if err != nil {
		m.free = append(m.free, start)
		return err
	}
	err = drv.EventRecord(ctx, start, s.h())
	if err == nil {
		err = launch()
	}
	if err == nil {
		err = drv.EventRecord(ctx, end, s.h())
	}
	if err != nil {
		m.free = append(m.free, start, end)
		return err
	}
	m.pending = append(m.pending, timedLaunch{start: start, end: end, est: est, charged: charged, mark: mark, in: m.open, bytes: bytes})
	s.markBusy() // priority.go
	return nil
}

// closeMeter folds in what completed (the stream was synchronised) and
// destroys the stream's events.
func (s *Stream) closeMeter(ctx cuda.Context) error {
	if s.meter == nil {
		return nil
	}
	m, drv := s.meter, s.t.pool.drv
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	errs := []error{s.pollLocked(ctx)}
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
	s.markIdle() // priority.go
	if s.t.prio.latency {
		s.t.pool.prio.remove(s)
	}
	for _, e := range m.free {
		errs = append(errs, drv.EventDestroy(ctx, e))
	}
	m.free = nil
	return errors.Join(errs...)
}

// gpuTimes polls every metered stream and returns the tenant's GPU time,
// in total and per class: launches, graph launches and Do brackets whose
// events have completed.
func (c *tenantCore) gpuTimes() (total time.Duration, byClass map[Class]time.Duration) {
	if !c.metered {
		return 0, nil
	}
	_ = c.pollStreams()
	byClass = make(map[Class]time.Duration)
	for cl := range c.gpuByClass {
		if ns := c.gpuByClass[cl].Load(); ns != 0 {
			byClass[Class(cl)] = time.Duration(ns)
			total += time.Duration(ns)
		}
	}
	return total, byClass
}

// cost is what a launch of f costs on s: predicted GPU time under a GPU
// share, else the launch-rate model's threads.
func (s *Stream) cost(f *Function, grid, block Dim3) float64 {
	if s.t.gpuShare {
		return s.gpuCost(f, grid, block)
	}
	return s.launchCost(grid, block)
}

// launchMetered is Launch (or, with try, TryLaunch) on a metered stream:
// fold in what completed, admit, launch between events. The caller is in
// the life lock: polled directly, with the primary context (current on any
// thread), never through c.do, whose second entry would wait at the gate
// of a Reshape that waits for this launch.
func (s *Stream) launchMetered(ctx context.Context, f *Function, grid, block Dim3, shmem uint32, args *Args, try bool) error {
	if err := s.poll(s.t.pool.dev.Primary()); err != nil {
		return err
	}
	var err error
	var charged, extra float64
	var mark tokenbucket.Mark
	if s.bucket != nil {
		// Just before the charge: what is given back for it later is
		// scaled by any change of share since (tokenbucket.Mark).
		mark = s.bucket.Mark()
		if try {
			charged = s.cost(f, grid, block)
			extra = s.floorSurcharge(f, grid, block, charged) // priority.go
			if !s.bucket.TryAcquire(charged + extra) {
				if s.t.closed.Load() || s.closed.Load() {
					return ErrClosed
				}
				return ErrThrottled
			}
		} else if charged, extra, err = s.admitLaunchFloored(ctx, f, grid, block); err != nil { // priority.go
			return err
		}
		if extra > 0 {
			s.t.prio.floored.Add(1) // priority.go
		}
	}
	if !s.t.gpuShare {
		charged = 0 // nothing to correct
	}
	err = s.launchTimedLocked(f, grid, block, shmem, args, charged, mark)
	if err != nil && extra > 0 {
		s.bucket.AdjustSince(-extra, mark) // nothing ran
	}
	return err
}

// streamClasses sizes the per-class GPU-time accounts.
const streamClasses = int(stream.NCCL) + 1
