package admission

import (
	"fmt"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/stream"
)

// What is admitted: a kernel launch (Work), a graph launch (Graph) or a
// Do, each priced as a job.

// Work is what one launch asks admission for. Its estimate is looked up
// only where it is used: on a metered gate.
type Work struct {
	Grid, Block cuda.Dim3
	Ests        *Estimates     // the kernel's estimates
	Bytes       *atomic.Uint64 // declared bytes moved per launch; 0: none
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

// Graph is what a graph launch asks admission for.
type Graph struct {
	Est     *Estimate
	Fixed   float64 // GraphExec.SetCost's; 0: priced
	Kernels []Shape // launched through the SDK during capture: priced by the launch-rate model when not fixed
}

// Shape is a kernel launch's grid and block.
type Shape struct{ Grid, Block cuda.Dim3 }

// A job is one admission's work as it is priced (price.go, charge.go): a
// kernel launch, a graph or a Do, on a stream of class class (a Do's is
// Default). It is a small value, passed by value to the engine's pricer
// and waiter: a pointer into the caller's stack would escape through
// their interfaces, an allocation per launch.
type job struct {
	class   stream.Class
	launch  bool      // a kernel launch (counted when admitted at the floor)
	threads float64   // the launch-rate model's measure: grid x block threads, a graph's kernels' summed; a Do's 0
	est     *Estimate // its GPU-time estimate: set before a GPU share prices it (a metered gate's admission sets a launch's)
	fixed   float64   // a graph's cost as set (GraphExec.SetCost): charged as it is; 0: priced
}

// launchJob is a launch of w on a stream of class cl. The threads are
// counted from w's fields one by one: w was just stored field by field
// (Work.Of), and a wide copy of it would stall. Its estimate is looked up
// where it is used (Gate.admit).
func launchJob(cl stream.Class, w *Work) job {
	return job{class: cl, launch: true, threads: threads(w.Grid, w.Block)}
}

// threads is grid x block's threads. float64 products: six uint32 factors
// can overflow any integer type.
func threads(grid, block cuda.Dim3) float64 {
	return float64(grid.X) * float64(grid.Y) * float64(grid.Z) *
		float64(block.X) * float64(block.Y) * float64(block.Z)
}

// kernelThreads is the threads of one launch of each of kernels, summed.
func kernelThreads(kernels []Shape) float64 {
	var sum float64
	for _, k := range kernels {
		sum += threads(k.Grid, k.Block)
	}
	return sum
}

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
