package admission

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// Gate is one stream's admission, chosen when the stream is made: its
// bucket (nil: not limited, or a class that bypasses) and its meter (nil:
// not metered). The zero Gate admits everything at once.
type Gate struct {
	t      *Tenant
	class  stream.Class
	hv     *atomic.Uintptr // the stream's CUstream (a Reshape swaps it)
	closed *atomic.Bool    // the stream's Close began
	bucket *tokenbucket.Stream
	meter  *meter
	free   bool // neither: Admit is one load
	// bound: a Do took the handle (Current.Stream), so a library may hold
	// it and queue on it in any later Do: every later Do times it.
	bound atomic.Bool
}

// Init makes g the gate of a stream of class cl whose handle hv holds
// and whose Close sets closed.
func (t *Tenant) Init(g *Gate, cl stream.Class, hv *atomic.Uintptr, closed *atomic.Bool) error {
	*g = Gate{t: t, class: cl, hv: hv, closed: closed}
	if t.cfg.Metered {
		g.meter = new(meter)
		t.listGate(g, true)
		if t.cfg.Latency {
			t.pool.add(g)
		}
	}
	if t.limiter == nil || cl.Bypass() {
		g.free = g.meter == nil
		return nil
	}
	b, err := t.limiter.NewStream(1)
	g.bucket = b
	return err
}

func (g *Gate) h() cuda.Stream { return cuda.Stream(g.hv.Load()) }

// Listed reports whether g went on its tenant's list of metered gates (and
// a latency tenant's on its pool's). A poll may still walk a copy of such a
// list after Close took g off it, so the memory g lies in must not serve
// another stream's gate.
func (g *Gate) Listed() bool { return g.meter != nil }

// Work is what one launch asks admission for. Its estimate is looked up
// only where it is used: an unmetered gate never does.
type Work struct {
	Grid, Block cuda.Dim3
	Ests        *Estimates     // the kernel's estimates
	Bytes       *atomic.Uint64 // declared bytes moved per launch; 0: none

	est *Estimate
}

// Of makes w a launch of grid x block of a kernel with estimates ests and
// declared bytes bytes. Set field by field: a composite literal is built
// aside and copied in 16-byte moves, which read back its 4-byte stores
// before they reach the cache (a store-forwarding stall, ~10 ns a launch
// on the limited path).
func (w *Work) Of(grid, block cuda.Dim3, ests *Estimates, bytes *atomic.Uint64) {
	w.Grid.X, w.Grid.Y, w.Grid.Z = grid.X, grid.Y, grid.Z
	w.Block.X, w.Block.Y, w.Block.Z = block.X, block.Y, block.Z
	w.Ests, w.Bytes = ests, bytes
}

func (w *Work) estimate() *Estimate {
	if w.est == nil {
		w.est = w.Ests.For(w.Grid, w.Block)
	}
	return w.est
}

// ticket makes *tk, zero, a ticket for w, not yet charged (set field by
// field: a whole Ticket returned and copied costs the launch path).
func (g *Gate) ticket(w *Work, tk *Ticket) {
	tk.g = g
	if g.meter != nil {
		tk.est, tk.bytes, tk.timed, tk.mark = w.estimate(), w.Bytes.Load(), true, g.mark()
	}
}

// mark is the bucket's parameters just before a charge that may be
// corrected or given back later (metered work): what is given back is
// scaled by any change of share since.
func (g *Gate) mark() tokenbucket.Mark {
	if g.bucket == nil {
		return tokenbucket.Mark{}
	}
	return g.bucket.Mark()
}

// Ticket is admitted work: what was charged, and how to settle or undo it.
// A Ticket is a value: admitting one allocates nothing. The zero Ticket
// is admitted, untimed work with nothing to settle.
type Ticket struct {
	g       *Gate
	charged float64          // corrected by the measured cost (GPU share); 0: nothing to correct
	extra   float64          // a bandwidth floor's surcharge: not corrected
	mark    tokenbucket.Mark // the bucket's parameters just before the charge
	est     *Estimate
	bytes   uint64
	start   cuda.Event
	timed   bool // queued between Begin and End, settled when measured
}

// cost is what a launch of w costs: predicted GPU time under a GPU share,
// else the launch-rate model's threads.
func (g *Gate) cost(w *Work) float64 {
	if g.t.gpuShare {
		return g.gpuCost(w.estimate())
	}
	return g.Cost(w.Grid, w.Block)
}

// Cost is the launch-rate model's price of grid x block on the gate (0
// when not limited): a graph's kernels each cost so much. The arrays are
// built here, element by element, from the launch's own fields: a wide
// copy of narrow stores would stall store forwarding on the launch path.
func (g *Gate) Cost(grid, block cuda.Dim3) float64 {
	if g.bucket == nil {
		return 0
	}
	return g.t.limiter.Cost([3]uint32{grid.X, grid.Y, grid.Z}, [3]uint32{block.X, block.Y, block.Z}, g.class)
}

// gpuCost is what work estimated by e costs under a GPU share: the
// predicted run time, scaled by the stream's class. At share 1 it is 0,
// admitted without touching the buckets: a share of the whole device is
// no limit, and a bucket charged at submission for time the GPU spends
// later would hold a full-share tenant back by the work it has queued (on
// the H200 a 1 ms kernel at share 1 left the GPU 11% idle after each
// Synchronize, while the bucket refilled the debt of what had been queued).
func (g *Gate) gpuCost(e *Estimate) float64 {
	if g.t.limiter.SMLimit() >= 1 {
		return 0
	}
	return g.predicted(e)
}

// predicted is e's GPU time scaled by the stream's class, whatever the
// share: a whole refill period before the first measurement.
func (g *Gate) predicted(e *Estimate) float64 {
	ns := e.get()
	if ns == 0 {
		ns = g.t.limiter.Capacity()
	}
	return ns * g.class.ThrottleScale()
}

// Admit charges a launch of w, waiting while the buckets are empty. It
// fails at once, charging nothing, when ctx's deadline falls before the
// tokens are due (an error matching context.DeadlineExceeded), and returns
// ErrClosed when the stream or tenant is, or gets, closed while waiting. A
// metered gate first folds in what completed. The caller is in the life
// lock.
//
// Admit fills *tk, which the caller gives zero (as TryAdmit does); an unlimited, unmetered
// gate (inlined) leaves it so.
func (g *Gate) Admit(ctx context.Context, w *Work, tk *Ticket) error {
	if g.free {
		return nil
	}
	return g.admit(ctx, w, tk)
}

// Free reports whether the gate admits everything untimed (an unlimited,
// unmetered stream's): the caller may skip admission, which then costs one
// load.
func (g *Gate) Free() bool { return g.free }

func (g *Gate) admit(ctx context.Context, w *Work, tk *Ticket) error {
	g.ticket(w, tk)
	if g.meter != nil {
		if err := g.poll(g.t.cfg.Primary()); err != nil {
			return err
		}
	}
	if g.bucket == nil {
		return nil
	}
	var err error
	if tk.charged, tk.extra, err = g.admitFloored(ctx, w); err != nil {
		*tk = Ticket{}
		return err
	}
	tk.settled()
	return nil
}

// TryAdmit is Admit without waiting: ErrThrottled, charging nothing, when
// the buckets do not hold the launch's cost now.
func (g *Gate) TryAdmit(w *Work, tk *Ticket) error {
	if g.free {
		return nil
	}
	return g.tryAdmit(w, tk)
}

func (g *Gate) tryAdmit(w *Work, tk *Ticket) error {
	g.ticket(w, tk)
	if g.meter != nil {
		if err := g.poll(g.t.cfg.Primary()); err != nil {
			return err
		}
	}
	if g.bucket == nil {
		return nil
	}
	tk.charged = g.cost(w)
	tk.extra = g.floorSurcharge(w, tk.charged)
	if !g.bucket.TryAcquire(tk.charged + tk.extra) {
		*tk = Ticket{}
		if g.t.cfg.Closed() || g.closed.Load() {
			return errs.ErrClosed
		}
		return errs.ErrThrottled
	}
	tk.settled()
	return nil
}

// settled notes the admission: a floored launch is counted, and only a
// GPU share's charge is corrected by the measurement.
func (tk *Ticket) settled() {
	if tk.extra > 0 && tk.g.meter != nil {
		tk.g.t.floored.Add(1)
	}
	if !tk.g.t.gpuShare {
		tk.charged = 0 // nothing to correct
	}
}

// Timed reports whether the work is to be queued between Begin and End.
func (tk *Ticket) Timed() bool { return tk.timed }

// Begin, for timed work, takes the stream's meter and records the start
// event in ctx; the work is queued next, then End. If Begin fails the
// ticket is cancelled.
func (tk *Ticket) Begin(ctx cuda.Context) error {
	g := tk.g
	m, ev := g.meter, g.t.cfg.Events
	m.mu.Lock()
	start, err := m.record(ev, ctx, g.h())
	if err != nil {
		m.mu.Unlock()
		tk.Cancel()
		return err
	}
	tk.start = start
	return nil
}

// End follows Begin once the work was queued, or failed to be (queued,
// the launch's error): it records the end event and leaves the ticket to
// be settled when that completes, or gives back its charge.
func (tk *Ticket) End(ctx cuda.Context, queued error) error {
	g := tk.g
	m, ev := g.meter, g.t.cfg.Events
	defer m.mu.Unlock()
	var end cuda.Event
	err := queued
	if err == nil {
		end, err = m.record(ev, ctx, g.h())
	}
	if err != nil {
		m.free = append(m.free, tk.start)
		tk.Cancel()
		return err
	}
	m.pending = append(m.pending, timed{start: tk.start, end: end, est: tk.est, charged: tk.charged, mark: tk.mark, in: m.open, bytes: tk.bytes})
	g.markBusy()
	return nil
}

// Cancel gives back what the ticket charged: its work did not run.
func (tk *Ticket) Cancel() {
	if n := tk.charged + tk.extra; n > 0 {
		tk.g.bucket.AdjustSince(-n, tk.mark)
	}
	tk.charged, tk.extra = 0, 0
}

// Reservation is a launch admitted ahead of time (Reserve).
type Reservation struct {
	tk Ticket
	r  *tokenbucket.Reservation // nil: not limited
}

// Reserve charges a launch of w now, going into debt if the buckets do
// not hold it.
func (g *Gate) Reserve(w *Work) (Reservation, error) {
	var rv Reservation
	g.ticket(w, &rv.tk)
	if g.bucket == nil {
		return rv, nil
	}
	if g.meter != nil {
		if err := g.t.do(g.poll); err != nil {
			return rv, err
		}
	}
	tk := &rv.tk
	tk.charged = g.cost(w)
	tk.extra = g.floorSurcharge(w, tk.charged)
	tk.mark = g.bucket.Mark()
	rv.r = g.bucket.Reserve(tk.charged + tk.extra)
	if !rv.r.OK() {
		return Reservation{}, errs.ErrClosed
	}
	if !g.t.gpuShare {
		tk.charged = 0
	}
	return rv, nil
}

// Delay is how long from now until the reservation may run.
func (r *Reservation) Delay() time.Duration {
	if r.r == nil {
		return 0
	}
	return r.r.Delay()
}

// Cancel gives back what Reserve took, unless it was used or cancelled.
func (r *Reservation) Cancel() {
	if r.r != nil {
		r.r.Cancel()
	}
}

// Wait waits until the reservation is due and returns its ticket; on
// error the reservation is cancelled.
func (r *Reservation) Wait(ctx context.Context) (Ticket, error) {
	if r.r != nil {
		if err := r.r.Wait(ctx); err != nil {
			return Ticket{}, closedErr(err)
		}
	}
	return r.tk, nil
}

// Shape is a kernel launch's grid and block.
type Shape struct{ Grid, Block cuda.Dim3 }

// CheckShape refuses, with errs.ErrInvalidArgument, a launch of kernel
// whose grid or block has a dimension of 0.
// It is inlined on the launch path: the error is formatted when read.
func CheckShape(kernel string, grid, block cuda.Dim3) error {
	if grid.Valid() && block.Valid() {
		return nil
	}
	return &shapeError{kernel, grid, block}
}

type shapeError struct {
	kernel      string
	grid, block cuda.Dim3
}

func (e *shapeError) Error() string {
	return fmt.Sprintf("%v: launch of %q with grid %v, block %v; every dimension must be at least 1", errs.ErrInvalidArgument, e.kernel, e.grid, e.block)
}

func (e *shapeError) Unwrap() error { return errs.ErrInvalidArgument }

// Graph is what a graph launch asks admission for.
type Graph struct {
	Est     *Estimate
	Fixed   float64 // GraphExec.SetCost's; 0: derived
	Kernels []Shape // launched through the SDK during capture: priced by Rate when not fixed
}

// Rate is a launch of a graph with these kernels' launch-rate price on
// the gate: its captured kernels', each priced as a launch of it (Cost).
func (g *Gate) Rate(kernels []Shape) float64 {
	var sum float64
	for _, k := range kernels {
		sum += g.Cost(k.Grid, k.Block)
	}
	return sum
}

// AdmitGraph charges a graph launch: its fixed cost if set, else under a
// GPU share its predicted GPU time (corrected when measured), else its
// kernels' launch-rate price. The cost is evaluated again when a change of
// share wakes the waiter. The caller is in the life lock; timed says
// whether a metered gate is to time it (a graph launched into a capture
// runs later, untimed).
func (g *Gate) AdmitGraph(ctx context.Context, w Graph, timed bool) (Ticket, error) {
	tk := Ticket{g: g, est: w.Est, timed: g.meter != nil && timed}
	if !tk.timed {
		if g.bucket != nil {
			if _, err := g.bucket.WaitCost(ctx, func() float64 {
				if w.Fixed != 0 {
					return w.Fixed
				}
				return g.Rate(w.Kernels)
			}); err != nil {
				return Ticket{}, closedErr(err)
			}
		}
		return tk, nil // untimed: nothing to settle
	}
	// The caller (LaunchGraph) is in the tenant's life lock: entering it
	// again could wait at a Reshape's gate while the Reshape waited for the
	// first entry.
	if err := g.poll(g.t.cfg.Primary()); err != nil {
		return Ticket{}, err
	}
	if g.bucket == nil {
		return tk, nil
	}
	var extra float64
	cost := func() float64 {
		switch {
		case w.Fixed != 0:
			return w.Fixed // as the caller set it: not corrected
		case g.t.gpuShare:
			base := g.gpuCost(w.Est)
			extra = g.t.floorExtra(base, func() float64 { return g.predicted(w.Est) })
			return base + extra
		}
		return g.Rate(w.Kernels)
	}
	tk.mark = g.bucket.Mark() // see Gate.mark
	charged, err := g.t.waitFloored(ctx, g.bucket, cost, &extra)
	if err != nil {
		return Ticket{}, closedErr(err)
	}
	tk.charged, tk.extra = charged-extra, extra
	if !g.t.gpuShare || w.Fixed != 0 {
		tk.charged, tk.extra = 0, charged // given back if it fails, never corrected
	}
	return tk, nil
}

// Close folds in what completed (the stream was synchronised), destroys
// the stream's events in ctx, and closes its bucket.
func (g *Gate) Close(ctx cuda.Context) error {
	var errs []error
	if g.bucket != nil {
		errs = append(errs, g.bucket.Close())
	}
	if g.meter != nil {
		errs = append(errs, g.closeMeter(ctx))
	}
	return errors.Join(errs...)
}
