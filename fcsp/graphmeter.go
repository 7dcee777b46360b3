package fcsp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// launchGraphMetered is LaunchGraph on a metered stream: fold in what
// completed, admit the graph's predicted cost, launch it between two
// events. The caller holds e.mu (read) and is in the life lock.
func (s *Stream) launchGraphMetered(ctx context.Context, e *GraphExec) error {
	c := s.t
	if err := c.do(s.poll); err != nil {
		return err
	}
	fixed := math.Float64frombits(e.cost.Load())
	// Evaluated again when a change of share (or, with a floor, the
	// latency tenants' idling) wakes a waiting launch.
	var extra float64
	cost := func() float64 {
		switch {
		case fixed != 0:
			return fixed // as the caller set it: not corrected
		case c.gpuShare:
			base := s.graphGPUCost(e)
			extra = c.floorExtra(base, func() float64 { return s.graphPredicted(e) })
			return base + extra
		}
		return e.costOn(s)
	}
	var charged float64
	var mark tokenbucket.Mark
	if s.bucket != nil {
		mark = s.bucket.Mark() // see launchMetered
		var err error
		if charged, err = c.waitFloored(ctx, s.bucket, cost, &extra); err != nil {
			return admitErr(err)
		}
	}
	var correct float64
	if c.gpuShare && fixed == 0 {
		correct = charged - extra
	}
	err := c.do(func(cctx cuda.Context) error {
		return s.queueTimed(cctx, &e.est, correct, mark, 0, func() error { return c.pool.drv.GraphLaunch(cctx, e.h, s.h()) })
	})
	if err != nil {
		if charged > 0 {
			s.bucket.AdjustSince(-charged, mark) // nothing ran
		}
		return fmt.Errorf("tenant %q: launching a graph: %w", c.name, err)
	}
	s.launches.Add(uint64(len(e.kernels)))
	return nil
}

// graphGPUCost is a launch of e's cost under a GPU share: its predicted
// GPU time (one refill period until measured) scaled by the stream's
// class; 0 at share 1, as gpuCost.
func (s *Stream) graphGPUCost(e *GraphExec) float64 {
	if s.t.limiter.SMLimit() >= 1 {
		return 0
	}
	return s.graphPredicted(e)
}

// graphPredicted is a launch of e's predicted GPU time scaled by the
// stream's class, whatever the share.
func (s *Stream) graphPredicted(e *GraphExec) float64 {
	ns := e.est.get()
	if ns == 0 {
		ns = s.t.limiter.Capacity()
	}
	return ns * s.class.ThrottleScale()
}

// graphSet is a tenant's live graphs and instantiated graphs. They are
// listed and unlisted inside calls counted in the tenant's life lock, and
// its Close destroys what is listed once those calls have ended, so a
// graph is destroyed exactly once whichever Close comes first.
type graphSet struct {
	mu     sync.Mutex
	live   map[any]struct{} // *Graph or *GraphExec
	closed bool
}

func (gs *graphSet) add(x any) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.closed {
		return ErrClosed // unreachable: added in the life lock, closed after it
	}
	if gs.live == nil {
		gs.live = map[any]struct{}{}
	}
	gs.live[x] = struct{}{}
	return nil
}

// remove unlists x and reports whether it was listed (then the caller
// destroys it).
func (gs *graphSet) remove(x any) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	_, ok := gs.live[x]
	delete(gs.live, x)
	return ok
}

// close destroys what is listed, in ctx. The tenant's calls are over.
func (gs *graphSet) close(drv cuda.Driver, ctx cuda.Context) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.closed = true
	var errs []error
	for x := range gs.live {
		switch x := x.(type) {
		case *GraphExec:
			errs = append(errs, drv.GraphExecDestroy(ctx, x.h))
		case *Graph:
			x.closed.Store(true)
			errs = append(errs, drv.GraphDestroy(ctx, x.h))
		}
	}
	gs.live = nil
	return errors.Join(errs...)
}

// forget drops the handles that died with a context reset.
func (gs *graphSet) forget() {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.live = nil
}
