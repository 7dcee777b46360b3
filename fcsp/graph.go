package fcsp

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/graphs"
)

// Graph is work captured from one of a tenant's streams (a decode step, say)
// and not yet instantiated. Close it when no longer needed.
type Graph struct {
	t *tenantCore
	g graphs.Graph // the handle, the kernels launched through the SDK during capture, the layout then
}

// GraphExec is an instantiated Graph, launched with Stream.LaunchGraph.
type GraphExec struct {
	t *tenantCore
	x graphs.Exec // the handle, its cost and estimate, the layout it was captured for
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
func (h *Stream) Capture(ctx context.Context, f func() error) (*Graph, error) {
	s, err := h.acquire()
	if err != nil {
		return nil, err
	}
	defer s.release()
	c := s.t
	var ferr error // f's own, returned as it is
	g, err := s.captureGraph(ctx, func() error { ferr = f(); return ferr }, f == nil)
	if err != nil && err != ferr {
		return nil, c.fail("Stream.Capture", err)
	}
	return g, err
}

// captureGraph is Capture of f (nilF: f was nil) on s, acquired
// (streams.Core.Capture).
func (s *streamCore) captureGraph(ctx context.Context, f func() error, nilF bool) (*Graph, error) {
	if nilF {
		return nil, errNilFunc
	}
	if ctx == nil {
		return nil, errNilContext
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.t.closed.Load() || s.Closed() {
		return nil, ErrClosed
	}
	c := s.t
	g := &Graph{t: c}
	if err := s.Capture((*host)(c), &c.dos, &g.g, f); err != nil {
		return nil, err
	}
	return g, nil
}

// The tenant as its graphs and the captures of its streams see it
// (graphs.Tenant, streams.Capturer).
func (h *host) DoGreen(f func(cc cuda.Context) error) error { return h.place.DoGreen(f) }
func (h *host) Layout() int                                 { return h.place.Layout() }
func (h *host) Graphs() *graphs.Set                         { return (*tenantCore)(h).graphSet() }

// Kernels is how many kernels were launched through the SDK during capture.
func (g *Graph) Kernels() int { return g.g.Kernels() }

// Instantiate makes the graph launchable (cuGraphInstantiateWithFlags).
func (g *Graph) Instantiate() (*GraphExec, error) {
	e := &GraphExec{t: g.t}
	if err := g.g.InstantiateIn((*host)(g.t), &e.x); err != nil {
		return nil, g.t.fail("Graph.Instantiate", err)
	}
	return e, nil
}

// Close destroys the graph (instantiated copies stay usable). Idempotent;
// the tenant's Close destroys the graphs left.
func (g *Graph) Close() error { return g.t.fail("Graph.Close", graphs.InLife((*host)(g.t), g.g.Close)) }

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
	return e.t.fail("GraphExec.SetCost", e.x.SetCost(tokens))
}

// Close destroys the instantiated graph once launches in flight are queued.
// Idempotent.
func (e *GraphExec) Close() error {
	return e.t.fail("GraphExec.Close", graphs.InLife((*host)(e.t), e.x.Close))
}

// LaunchGraph queues e on s after admitting it through the stream's and the
// tenant's launch limiter, like a kernel (see GraphExec.SetCost), waiting
// while they are empty; ctx ends the wait with nothing launched or charged.
// The graph must have been captured on one of this tenant's streams: its
// kernels then run on this tenant's SMs. On a metered stream the launch is
// timed by events around it, like a kernel's, and its GPU time counts to
// the tenant and the stream's class.
func (h *Stream) LaunchGraph(ctx context.Context, e *GraphExec) error {
	s, err := h.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	return s.t.fail("Stream.LaunchGraph", s.launchGraph(ctx, e))
}

// launchGraph is LaunchGraph on s, acquired; its errors are bare.
func (s *streamCore) launchGraph(ctx context.Context, e *GraphExec) error {
	if e == nil {
		return fmt.Errorf("%w: a nil *GraphExec; pass one from Graph.Instantiate", ErrInvalidArgument)
	}
	if ctx == nil {
		return errNilContext
	}
	if s.t.closed.Load() || s.Closed() {
		return ErrClosed
	}
	if e.t != s.t {
		return fmt.Errorf("%w: the graph was captured on %s's stream; launch it on that tenant's streams", ErrInvalidArgument, tenantName(e.t.name))
	}
	// Admission and launch in the life lock, as Launch: the tenant's Close
	// destroys the exec only after this launch has left, and no Reshape
	// moves the tenant meanwhile (streams.Core.LaunchGraph).
	c := s.t
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.Exit(slot)
	return s.LaunchGraph(ctx, &e.x, int32(c.place.Layout()))
}
