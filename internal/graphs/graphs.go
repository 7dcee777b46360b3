// Package graphs is a tenant's CUDA graphs as the driver sees them: the
// capture of a stream, instantiation, launch and destruction, and the list
// of what is live, so that the tenant's Close destroys what its owners did
// not, exactly once. fcsp's Graph and GraphExec hold the handles this
// package makes and decide when (in which context, under which lock) each
// call is made.
package graphs

import (
	"errors"
	"sync"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// ErrClosed: the set was closed (its tenant's calls are over); the shared
// sentinel, as every other engine's.
var ErrClosed = errs.ErrClosed

// Set is one tenant's live graphs and executable graphs. They are listed
// and unlisted inside calls its tenant counts in flight, and Close, made
// once those calls have ended, destroys what is listed.
type Set struct {
	drv    cuda.Driver
	mu     sync.Mutex
	graphs map[cuda.Graph]struct{}
	execs  map[cuda.GraphExec]struct{}
	closed bool
}

// New returns an empty set whose calls go to drv.
func New(drv cuda.Driver) *Set { return &Set{drv: drv} }

// BeginCapture starts a relaxed capture of s.
func (gs *Set) BeginCapture(ctx cuda.Context, s cuda.Stream) error {
	return gs.drv.StreamBeginCapture(ctx, s, cuda.CaptureModeRelaxed)
}

// EndCapture ends the capture of s; with keep the graph is listed in the
// same call (so a Close cannot miss it), else destroyed.
func (gs *Set) EndCapture(ctx cuda.Context, s cuda.Stream, keep bool) (cuda.Graph, error) {
	g, err := gs.drv.StreamEndCapture(ctx, s)
	if err != nil {
		return 0, err
	}
	if !keep {
		return 0, gs.drv.GraphDestroy(ctx, g)
	}
	if err := gs.add(func() { gs.graphs[g] = struct{}{} }); err != nil {
		return 0, errors.Join(err, gs.drv.GraphDestroy(ctx, g)) // not left to no one
	}
	return g, nil
}

// Instantiate makes g launchable in ctx (an executable graph runs on the
// SMs of the context it was instantiated in) and lists it.
func (gs *Set) Instantiate(ctx cuda.Context, g cuda.Graph) (cuda.GraphExec, error) {
	e, err := gs.drv.GraphInstantiate(ctx, g)
	if err != nil {
		return 0, err
	}
	if err := gs.add(func() { gs.execs[e] = struct{}{} }); err != nil {
		return 0, errors.Join(err, gs.drv.GraphExecDestroy(ctx, e))
	}
	return e, nil
}

// Launch queues e on s.
func (gs *Set) Launch(ctx cuda.Context, e cuda.GraphExec, s cuda.Stream) error {
	return gs.drv.GraphLaunch(ctx, e, s)
}

// DestroyGraph unlists and destroys g, unless it was not listed (destroyed
// before, or by Close).
func (gs *Set) DestroyGraph(ctx cuda.Context, g cuda.Graph) error {
	if !unlist(gs, gs.graphs, g) {
		return nil
	}
	return gs.drv.GraphDestroy(ctx, g)
}

// DestroyExec is DestroyGraph for an executable graph.
func (gs *Set) DestroyExec(ctx cuda.Context, e cuda.GraphExec) error {
	if !unlist(gs, gs.execs, e) {
		return nil
	}
	return gs.drv.GraphExecDestroy(ctx, e)
}

// unlist removes h from list (one of gs's) and reports whether it was
// there: whoever unlists a handle destroys it, once.
func unlist[H comparable](gs *Set, list map[H]struct{}, h H) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	_, ok := list[h]
	delete(list, h)
	return ok
}

func (gs *Set) add(list func()) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.closed {
		return ErrClosed // fcsp lists in a call in flight, and closes after them
	}
	if gs.graphs == nil {
		gs.graphs, gs.execs = map[cuda.Graph]struct{}{}, map[cuda.GraphExec]struct{}{}
	}
	list()
	return nil
}

// Close destroys, in ctx, what is listed; the tenant's calls are over.
// Later calls to list anything fail with ErrClosed.
func (gs *Set) Close(ctx cuda.Context) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.closed = true
	var errs []error
	for e := range gs.execs {
		errs = append(errs, gs.drv.GraphExecDestroy(ctx, e))
	}
	for g := range gs.graphs {
		errs = append(errs, gs.drv.GraphDestroy(ctx, g))
	}
	gs.graphs, gs.execs = nil, nil
	return errors.Join(errs...)
}
