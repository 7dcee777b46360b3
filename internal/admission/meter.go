package admission

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// GPU-time metering: a metered stream records an event before and after
// each launch and reads them back lazily (cuEventQuery, which never waits)
// when the stream next launches or Stats is asked, so nothing on the launch
// path waits for the GPU. Completed launches add their GPU time to the
// stream's tenant (per class), update their kernel's running estimate and,
// under a GPU share, correct the bucket by the difference between the
// estimate charged and the time measured.

// ewmaWeight is the weight of a new measurement in an estimate.
const ewmaWeight = 0.25

// Estimate is a running average of one kind of work's GPU time, in ns
// (float64 bits; 0: not measured yet).
type Estimate struct {
	ns   atomic.Uint64
	best atomic.Uint64 // lowest ns has been (the slowdown, priority.go)
}

func (e *Estimate) get() float64 { return math.Float64frombits(e.ns.Load()) }

func (e *Estimate) add(ns float64) {
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

// Estimates is a kernel's estimates per launch shape.
type Estimates struct {
	m    sync.Map // [6]uint32 launch shape -> *Estimate
	last atomic.Pointer[shapeEstimate]
}

type shapeEstimate struct {
	key [6]uint32
	e   *Estimate
}

// For is the estimate of launches of grid x block. The shape last asked
// for is found without the map (a map key boxed into an interface
// allocates: one allocation per metered launch otherwise).
func (es *Estimates) For(grid, block cuda.Dim3) *Estimate {
	key := [6]uint32{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z}
	if l := es.last.Load(); l != nil && l.key == key {
		return l.e
	}
	var e *Estimate
	if v, ok := es.m.Load(key); ok {
		e = v.(*Estimate)
	} else {
		v, _ := es.m.LoadOrStore(key, new(Estimate))
		e = v.(*Estimate)
	}
	es.last.Store(&shapeEstimate{key: key, e: e})
	return e
}

// meter is a stream's work in flight, timed by events.
type meter struct {
	mu      sync.Mutex
	free    []cuda.Event
	pending []timed      // in stream order
	gpu     atomic.Int64 // ns of completed work
	open    *bracket     // the Do bracket open on the stream, if any (do.go)
	closed  bool         // closeMeter ran: no event is made any more

	busy bool             // counted in the pool's busy latency streams (priority.go)
	bw   bandwidthAccount // recent launches' bandwidth figures (priority.go)
}

type timed struct {
	start, end cuda.Event
	est        *Estimate
	charged    float64          // tokens to correct by the measurement (GPU share), else 0
	mark       tokenbucket.Mark // the bucket's parameters just before that charge
	in         *bracket         // the Do bracket open when it was queued: its time is not the Do's
	br         *bracket         // non-nil: this is that Do bracket's own entry (est, charged unused)
	bytes      uint64           // declared bytes moved (priority.go)
}

// event takes an event from the free list or makes one.
func (m *meter) event(ev Events, ctx cuda.Context) (cuda.Event, error) {
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
	return ev.EventCreate(ctx, cuda.EventDefault)
}

// record takes an event (event) and records it on stream h; one the driver
// refuses to record goes back to the free list. The caller holds m.mu.
func (m *meter) record(ev Events, ctx cuda.Context, h cuda.Stream) (cuda.Event, error) {
	e, err := m.event(ev, ctx)
	if err != nil {
		return 0, err
	}
	if err := ev.EventRecord(ctx, e, h); err != nil {
		m.free = append(m.free, e)
		return 0, err
	}
	return e, nil
}

// poll folds the work whose events completed into the accounts, oldest
// first, stopping at the first not yet complete. It never waits.
func (g *Gate) poll(ctx cuda.Context) error {
	m := g.meter
	m.mu.Lock()
	defer m.mu.Unlock()
	return g.pollLocked(ctx)
}

func (g *Gate) pollLocked(ctx cuda.Context) error {
	m, ev, t := g.meter, g.t.cfg.Events, g.t
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
			g.markIdle()
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
			t.gpu[g.class].Add(int64(own))
			p.br.measured(own * g.class.ThrottleScale())
			m.free = append(m.free, p.start, p.end)
			done++
			continue
		}
		if p.in != nil {
			p.in.inner += ns
		}
		m.gpu.Add(int64(ns))
		t.gpu[g.class].Add(int64(ns))
		p.est.add(ns)
		g.observe(&p, ns) // the bandwidth account (priority.go)
		if p.charged > 0 {
			// Launches admitted free (share 1, NCCL) are not limited, so
			// there is nothing to correct. Settled at the worth of the
			// charge: a share lowered since scales what is given back as
			// it scaled the tokens in hand.
			g.bucket.AdjustSince(ns*g.class.ThrottleScale()-p.charged, p.mark)
		}
		m.free = append(m.free, p.start, p.end)
		done++
	}
	return nil
}

// closeMeter folds in what completed (the stream was synchronised) and
// destroys the stream's events.
func (g *Gate) closeMeter(ctx cuda.Context) error {
	m, ev, t := g.meter, g.t.cfg.Events, g.t
	t.listGate(g, false)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	errs := []error{g.pollLocked(ctx)}
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
	g.markIdle()
	if t.cfg.Latency {
		t.pool.remove(g)
	}
	for _, e := range m.free {
		errs = append(errs, ev.EventDestroy(ctx, e))
	}
	m.free = nil
	return errors.Join(errs...)
}

// listGate adds g to the metered gates, or removes it.
func (t *Tenant) listGate(g *Gate, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next []*Gate
	if cur := t.gates.Load(); cur != nil {
		next = make([]*Gate, 0, len(*cur)+1)
		for _, x := range *cur {
			if x != g {
				next = append(next, x)
			}
		}
	}
	if add {
		next = append(next, g)
	}
	t.gates.Store(&next)
}

// metered is the metered streams' gates.
func (t *Tenant) metered() []*Gate {
	if l := t.gates.Load(); l != nil {
		return *l
	}
	return nil
}

// Poll folds in the completed work of every metered stream. It allocates
// nothing: it runs before every admitted Do.
func (t *Tenant) Poll() error {
	if len(t.metered()) == 0 {
		return nil
	}
	return t.do(t.pollAll)
}

func (t *Tenant) pollAll(ctx cuda.Context) error {
	var err error
	for _, g := range t.metered() {
		if e := g.poll(ctx); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}

// AfterSync folds a latency stream's completed work in after its
// Synchronize, so its neighbours are released at once rather than at its
// next launch.
func (g *Gate) AfterSync() {
	if g.meter != nil && g.t.cfg.Latency {
		_ = g.t.do(g.poll)
	}
}
