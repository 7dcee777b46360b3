package graphs

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Do makes a call in a context of the tenant's choosing: fcsp's tenant
// decides which context, and under which lock, each call is made in.
type Do func(f func(cuda.Context) error) error

// Tenant is a graph's tenant as the calls on its graphs see it: the calls
// it counts in its life lock, its primary context, and its green
// contexts, in which an executable graph is instantiated.
type Tenant interface {
	// Enter counts a call in; its error refuses it (errs.ErrClosed once the
	// tenant's Close began). Exit ends it.
	Enter() (uint32, error)
	Exit(slot uint32)
	Primary() cuda.Context
	// DoGreen runs f in one of the tenant's green contexts.
	DoGreen(f func(cuda.Context) error) error
}

// InLife runs close, a graph's or an exec's Close (which takes the
// graph's own lock around the call it makes through its Do), counted in
// t's life lock, with t's primary context: the life lock first, as
// launches and instantiations take them. A Close that held its graph's
// lock while it waited at a Reshape's gate kept a launch from inside a
// Do, which the Reshape waits for, from that lock. Refused by a closing
// tenant (errs.ErrClosed), close leaves the graph to the set's Close.
func InLife(t Tenant, close func(Do) error) error {
	slot, err := t.Enter()
	if err != nil {
		return close(func(func(cuda.Context) error) error { return err })
	}
	defer t.Exit(slot)
	return close(func(f func(cuda.Context) error) error { return f(t.Primary()) })
}

// InstantiateIn is Instantiate counted in t's life lock (the life lock
// before the graph's lock, as Close takes them), in one of t's green
// contexts: an executable graph runs on the SMs of the context it was
// instantiated in, whatever the stream.
func (g *Graph) InstantiateIn(t Tenant, e *Exec) error {
	slot, err := t.Enter()
	if err != nil {
		return err
	}
	defer t.Exit(slot)
	return g.Instantiate(e, t.DoGreen)
}

// Recording is what a stream records while it is captured: the kernels
// launched on it through the SDK (not charged then: a launch of the graph
// is).
type Recording struct {
	mu      sync.Mutex
	kernels []admission.Shape
}

// Record notes a kernel launched on a stream whose recording is r (nil:
// the stream is not capturing); it reports whether the stream is capturing
// (the launch is then not charged now).
func (r *Recording) Record(grid, block cuda.Dim3) bool {
	if r == nil {
		return false
	}
	r.record(grid, block)
	return true
}

func (r *Recording) record(grid, block cuda.Dim3) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kernels = append(r.kernels, admission.Shape{Grid: grid, Block: block})
}

// Graph is a captured graph: its handle, the kernels launched through the
// SDK during capture, and its tenant's layout then.
type Graph struct {
	gs      *Set
	h       cuda.Graph
	kernels []admission.Shape
	layout  int32
	closed  atomic.Bool
	mu      sync.Mutex // Close against an instantiation's use of h
}

// Capture makes g a capture of s: it begins a relaxed capture of s in
// (the tenant's green context), runs f and ends the capture, listing the
// graph for the set's Close in the same call, so that a Close cannot miss
// it; the kernels rec noted meanwhile go with it, and layout is the
// tenant's layout. If f fails or panics the capture is ended and
// discarded; f's error is returned as it is (joined with the end's, if
// that failed too).
func (gs *Set) Capture(g *Graph, in Do, s cuda.Stream, rec *Recording, layout int32, f func() error) error {
	g.gs, g.layout = gs, layout
	if err := in(func(ctx cuda.Context) error { return gs.BeginCapture(ctx, s) }); err != nil {
		return err
	}
	end := func(keep bool) error {
		return in(func(ctx cuda.Context) (err error) {
			g.h, err = gs.EndCapture(ctx, s, keep)
			return err
		})
	}
	ended := false
	defer func() {
		if !ended { // f panicked: end the capture, drop what it made
			_ = end(false)
		}
	}()
	ferr := f()
	ended = true
	if ferr != nil {
		if err := end(false); err != nil {
			return errors.Join(ferr, err)
		}
		return ferr
	}
	if err := end(true); err != nil {
		return fmt.Errorf("ending the capture: %w", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	g.kernels = rec.kernels
	return nil
}

// Kernels is how many kernels were launched through the SDK during capture.
func (g *Graph) Kernels() int { return len(g.kernels) }

// Instantiate makes e, listed, an executable copy of g, instantiated by in
// (in the context whose SMs it is to run on); errs.ErrClosed once g is
// closed.
func (g *Graph) Instantiate(e *Exec, in Do) error {
	if g.closed.Load() {
		return errs.ErrClosed
	}
	e.gs, e.kernels, e.layout = g.gs, g.kernels, g.layout
	g.mu.Lock()
	defer g.mu.Unlock()
	return in(func(ctx cuda.Context) (err error) {
		e.h, err = g.gs.Instantiate(ctx, g.h)
		return err
	})
}

// Close unlists and destroys g in a call made by do, once; a do refused
// with errs.ErrClosed (the tenant closed) leaves it to the set's Close.
func (g *Graph) Close(do Do) error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// Unlisted and destroyed in one call (in the tenant's life lock): the
	// set's Close destroys what is listed after the calls end.
	err := do(func(ctx cuda.Context) error { return g.gs.DestroyGraph(ctx, g.h) })
	if errors.Is(err, errs.ErrClosed) {
		return nil // the set's Close destroys it
	}
	return err
}

// Exec is an executable graph and what its launches are charged.
type Exec struct {
	gs      *Set
	h       cuda.GraphExec
	kernels []admission.Shape
	layout  int32              // the tenant's layout when it was captured
	cost    atomic.Uint64      // math.Float64bits of the tokens charged per launch; 0: derived from kernels
	est     admission.Estimate // its measured GPU time per launch, on metered streams
	mu      sync.RWMutex       // launches (read) against Close (write)
	closed  bool
}

// SetCost sets the tokens a launch is charged (0: derived); anything but
// a finite number, 0 or more, is errs.ErrInvalidArgument.
func (e *Exec) SetCost(tokens float64) error {
	if !(tokens >= 0) || math.IsInf(tokens, 1) {
		return fmt.Errorf("%w: graph cost %v; want a finite number of tokens, 0 or more", errs.ErrInvalidArgument, tokens)
	}
	e.cost.Store(math.Float64bits(tokens))
	return nil
}

// Layout is its tenant's layout when the graph was captured. A launch in
// any other layout (the tenant was reshaped since) is refused: an
// executable graph runs on the SMs it was captured for, and instantiating
// it again in the new layout does not move it (measured on the H200:
// instantiated at 32 SMs, re-instantiated after shrinking to 8, it still
// ran on the 32, 24 of them by then the neighbour's; the kernel nodes keep
// the context they were captured in). The check is one load on the launch
// path.
func (e *Exec) Layout() int32 { return e.layout }

// Kernels is how many kernels were launched through the SDK during capture
// (what a launch adds to the stream's count).
func (e *Exec) Kernels() int { return len(e.kernels) }

// Work is what a launch of e asks admission for.
func (e *Exec) Work() admission.Graph {
	return admission.Graph{Est: &e.est, Fixed: math.Float64frombits(e.cost.Load()), Kernels: e.kernels}
}

// Enter begins a launch of e, which Close waits for; errs.ErrClosed once
// e is closed. Exit ends it.
func (e *Exec) Enter() error {
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		return errs.ErrClosed
	}
	return nil
}

// Exit ends a launch begun by Enter.
func (e *Exec) Exit() { e.mu.RUnlock() }

// Launch queues e on s in ctx; the caller is between Enter and Exit.
func (e *Exec) Launch(ctx cuda.Context, s cuda.Stream) error { return e.gs.Launch(ctx, e.h, s) }

// LaunchTimed queues e on s in ctx between tk's events, as timed work is
// (Ticket.Time, which holds the stream's meter across the launch).
func (e *Exec) LaunchTimed(ctx cuda.Context, tk *admission.Ticket, s cuda.Stream) error {
	return tk.Time(ctx, func() error { return e.Launch(ctx, s) })
}

// Close unlists and destroys e in a call made by do, once launches in
// flight are queued; later launches fail with errs.ErrClosed. A do refused
// with errs.ErrClosed (the tenant closed) leaves it to the set's Close.
func (e *Exec) Close(do Do) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := do(func(ctx cuda.Context) error { return e.gs.DestroyExec(ctx, e.h) })
	if errors.Is(err, errs.ErrClosed) {
		return nil // the set's Close destroys it
	}
	return err
}
