package fcsp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
)

// Graph is work captured from one of a tenant's streams (a decode step, say)
// and not yet instantiated. Close it when no longer needed.
type Graph struct {
	t       *tenantCore
	h       cuda.Graph
	kernels []launchShape // the kernels launched through the SDK during capture
	closed  atomic.Bool
	mu      sync.Mutex // Close against an instantiation's use of h
	layout  int32      // the tenant's layout during the capture (onCurrentSMs)
}

// GraphExec is an instantiated Graph, launched with Stream.LaunchGraph.
type GraphExec struct {
	t       *tenantCore
	h       cuda.GraphExec
	kernels []launchShape
	cost    atomic.Uint64      // math.Float64bits of the tokens charged per launch; 0: derived from kernels
	est     admission.Estimate // its measured GPU time per launch, on metered streams
	mu      sync.RWMutex       // launches (read) against Close and re-instantiation (write)
	closed  bool
	// The partition's layout when it was captured: an executable graph runs
	// on the SMs it was captured for (onCurrentSMs).
	layout atomic.Int32
}

type launchShape struct{ grid, block Dim3 }

// capturing is what a stream records while Capture runs.
type capturing struct {
	mu      sync.Mutex
	kernels []launchShape
}

// Capture records the work f queues on s into a Graph instead of running
// it: kernels launched on s through the SDK (not charged to the limiter
// now: a launch of the graph is) and any library calls f makes on s's
// handle (inside Tenant.Do). The capture is relaxed: other calls made while
// it runs are not refused, and what f queues on other streams is not
// captured. Calls the driver forbids on a capturing stream fail as it
// makes them (Synchronize on s: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and
// the capture is lost). If f fails or panics the capture is ended and
// discarded. The tenant's Close waits for a capture under way to end (so f
// must not close the tenant).
func (s *Stream) Capture(ctx context.Context, f func() error) (g *Graph, err error) {
	if f == nil {
		return nil, fmt.Errorf("%w: Capture with a nil function", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.t.closed.Load() || s.closed.Load() {
		return nil, ErrClosed
	}
	c := s.t
	rec := &capturing{}
	if !s.capture.CompareAndSwap(nil, rec) {
		return nil, fmt.Errorf("%w: stream of tenant %q is already capturing", ErrInvalidArgument, c.name)
	}
	defer s.capture.Store(nil)
	// The whole capture counts in the life lock: the tenant's Close waits
	// for it to end (f's calls on the tenant fail with ErrClosed meanwhile)
	// instead of synchronising a capturing stream, which the driver refuses
	// (and which invalidates the capture). Hence begin and end go to the
	// context directly, not through c.do, which a Close under way refuses.
	slot, err := c.enter()
	if err != nil {
		return nil, err
	}
	defer c.life.exit(slot)
	// f's calls on the tenant are made on behalf of a call in the life lock,
	// as a Do's are: pinned and named as one, they pass a Reshape's gate (the
	// Reshape waits for this capture) and a Close from f is ErrInsideDo.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	thread := osthread.ID()
	inside := c.dos.enter(thread)
	defer c.dos.exit(inside, thread)
	inCtx := c.place.doGreen
	if err := inCtx(func(ctx cuda.Context) error { return c.graphSet().BeginCapture(ctx, s.h()) }); err != nil {
		return nil, fmt.Errorf("tenant %q: %w", c.name, err)
	}
	g = &Graph{t: c, layout: int32(c.place.layout())}
	// end ends the capture; with keep, the graph is listed for the tenant's
	// Close in the same call, so a Close cannot miss it.
	end := func(keep bool) error {
		return inCtx(func(ctx cuda.Context) (err error) {
			g.h, err = c.graphs.EndCapture(ctx, s.h(), keep)
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
		return nil, errors.Join(ferr, end(false))
	}
	if err := end(true); err != nil {
		return nil, fmt.Errorf("tenant %q: capture: %w", c.name, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	g.kernels = rec.kernels
	return g, nil
}

// Kernels is how many kernels were launched through the SDK during capture.
func (g *Graph) Kernels() int { return len(g.kernels) }

// Instantiate makes the graph launchable (cuGraphInstantiateWithFlags).
func (g *Graph) Instantiate() (*GraphExec, error) {
	if g.closed.Load() {
		return nil, ErrClosed
	}
	e := &GraphExec{t: g.t, kernels: g.kernels}
	e.layout.Store(g.layout)
	g.mu.Lock()
	defer g.mu.Unlock()
	// In one of the tenant's green contexts: an executable graph runs on
	// the SMs of the context it was instantiated in, whatever the stream.
	err := g.t.doGreen(func(ctx cuda.Context) (err error) {
		e.h, err = g.t.graphs.Instantiate(ctx, g.h)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tenant %q: %w", g.t.name, err)
	}
	return e, nil
}

// Close destroys the graph (instantiated copies stay usable). Idempotent;
// the tenant's Close destroys the graphs left.
func (g *Graph) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.t.do(func(ctx cuda.Context) error {
		// Unlisted and destroyed in one call in the life lock: the
		// tenant's Close destroys what is listed after the calls end.
		return g.t.graphs.DestroyGraph(ctx, g.h)
	})
	if errors.Is(err, ErrClosed) {
		return nil // the tenant's Close destroys it
	}
	return err
}

// SetCost sets the tokens one launch of the graph charges to the stream's
// and tenant's launch limiter (the same units as a kernel's grid x block
// cost; under WithGPUShare, nanoseconds of GPU time, charged as set and
// not corrected). 0, the default, derives it: under WithGPUShare from a
// running estimate of the graph's measured launches (one refill period
// until the first is measured), corrected when each launch's events
// complete; else from the kernels captured through the SDK, each costed
// like a launch of it on the launching stream (set it for graphs whose
// kernels came from libraries).
func (e *GraphExec) SetCost(tokens float64) error {
	if !(tokens >= 0) || math.IsInf(tokens, 1) {
		return fmt.Errorf("%w: graph cost %v; want a finite number of tokens, 0 or more", ErrInvalidArgument, tokens)
	}
	e.cost.Store(math.Float64bits(tokens))
	return nil
}

// Close destroys the instantiated graph once launches in flight are queued.
// Idempotent.
func (e *GraphExec) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.t.do(func(ctx cuda.Context) error { return e.t.graphs.DestroyExec(ctx, e.h) })
	if errors.Is(err, ErrClosed) {
		return nil // the tenant's Close destroys it
	}
	return err
}

// LaunchGraph queues e on s after admitting it through the stream's and the
// tenant's launch limiter, like a kernel (see GraphExec.SetCost), waiting
// while they are empty; ctx ends the wait with nothing launched or charged.
// The graph must have been captured on one of this tenant's streams: its
// kernels then run on this tenant's SMs. On a metered stream the launch is
// timed by events around it, like a kernel's, and its GPU time counts to
// the tenant and the stream's class.
func (s *Stream) LaunchGraph(ctx context.Context, e *GraphExec) error {
	if e == nil {
		return fmt.Errorf("%w: LaunchGraph of a nil graph", ErrInvalidArgument)
	}
	if s.t.closed.Load() || s.closed.Load() {
		return ErrClosed
	}
	if e.t != s.t {
		return fmt.Errorf("%w: a graph of tenant %q launched on tenant %q's stream", ErrInvalidArgument, e.t.name, s.t.name)
	}
	if err := e.onCurrentSMs(); err != nil {
		return err
	}
	// e.mu before the life lock, as GraphExec.Close takes them.
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	// Admission and launch in the life lock, as Launch: the tenant's Close
	// destroys the exec only after this launch has left.
	c := s.t
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.exit(slot)
	// A graph launched into a capture runs later, untimed.
	tk, err := s.gate.AdmitGraph(ctx, admission.Graph{Est: &e.est, Fixed: math.Float64frombits(e.cost.Load()), Rate: func() float64 { return e.rateCost(s) }}, s.capture.Load() == nil)
	if err != nil {
		return err
	}
	if tk.Timed() {
		err = c.do(func(cctx cuda.Context) error {
			err := tk.Begin(cctx)
			if err == nil {
				err = tk.End(cctx, c.graphs.Launch(cctx, e.h, s.h()))
			}
			return err
		})
	} else {
		err = c.doUnscopedLocked(&c.pool.unscoped.launch, func(ctx cuda.Context) error {
			return c.graphs.Launch(ctx, e.h, s.h())
		})
	}
	if err != nil {
		return fmt.Errorf("tenant %q: launching a graph: %w", s.t.name, err)
	}
	s.launches.Add(uint64(len(e.kernels)))
	return nil
}

// rateCost is a launch of e's launch-rate price on s: its captured
// kernels', each priced as a launch of it.
func (e *GraphExec) rateCost(s *Stream) float64 {
	var sum float64
	for _, k := range e.kernels {
		sum += s.gate.Cost(k.grid.cuda(), k.block.cuda())
	}
	return sum
}

// recordCapture notes a kernel launched on s while it captures; it reports
// whether s is capturing (the launch is then not charged now).
func (s *Stream) recordCapture(grid, block Dim3) bool {
	rec := s.capture.Load()
	if rec == nil {
		return false
	}
	rec.mu.Lock()
	rec.kernels = append(rec.kernels, launchShape{grid, block})
	rec.mu.Unlock()
	return true
}

// onCurrentSMs refuses e when the tenant has been reshaped since it was
// captured: an executable graph runs on the SMs it was captured for, and
// instantiating it again in the new layout does not move it (measured on
// the H200: instantiated at 32 SMs, re-instantiated after shrinking to 8,
// it still ran on the 32, 24 of them by then the neighbour's; the kernel
// nodes keep the context they were captured in). The check is one load on
// the launch path.
func (e *GraphExec) onCurrentSMs() error {
	c := e.t
	if !c.place.reshapable() || e.layout.Load() == int32(c.place.layout()) {
		return nil
	}
	return fmt.Errorf("%w: tenant %q was reshaped to %d SMs since this graph was captured, and a graph runs on the SMs it was captured for; capture it again (Stream.Capture) after a Reshape",
		ErrStaleGraph, c.name, c.place.sms())
}
