package streams

import (
	"context"
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/graphs"
	"github.com/fcsp-go/fcsp-go/internal/modules"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// Launch queues k on the stream as grid x block with shmem bytes of
// dynamic shared memory; the caller is in its tenant's life lock, so that
// a Close cannot end the tenant between a launch's charge and its launch
// (Close closes the limiter first, which wakes a waiting admission). A
// kernel launched while the stream is captured is recorded, not charged
// (a launch of its graph is), and a free gate (unlimited, unmetered)
// admits everything; any other launch is admitted first (with try,
// without waiting: errs.ErrThrottled) and timed where its ticket says
// (Run).
func (c *Core) Launch(ctx context.Context, k *modules.Kernel, grid, block cuda.Dim3, shmem uint32, args *cuda.Args, try bool) error {
	if c.capture.Load().Record(grid, block) || c.gate.Free() {
		return c.Queue(k, grid, block, shmem, args)
	}
	var tk admission.Ticket
	var w admission.Work
	w.Of(grid, block, &k.Est, &k.Bytes)
	var err error
	if try {
		err = c.gate.TryAdmit(&w, &tk)
	} else {
		err = c.gate.Admit(ctx, &w, &tk)
	}
	if err != nil {
		return err
	}
	return c.Run(&tk, k, grid, block, shmem, args)
}

// Run queues an admitted launch: with a timed ticket between its events,
// with the primary context, which serves every green stream
// (docs/CONTEXTS.md): no green context is taken; else through Queue. The
// caller is in the tenant's life lock. Time holds the stream's meter
// across the launch (internal/admission; docs/LOCKS.md).
func (c *Core) Run(tk *admission.Ticket, k *modules.Kernel, grid, block cuda.Dim3, shmem uint32, args *cuda.Args) error {
	if !tk.Timed() {
		return c.Queue(k, grid, block, shmem, args)
	}
	ctx := c.launcher.Dev.Primary()
	// Time holds the stream's meter from the ticket's start event to its
	// end event, across this launch: no other timed work comes between.
	err := tk.Time(ctx, func() error {
		return c.launcher.LaunchIn(ctx, k.H, grid, block, shmem, c.Handle(), args)
	})
	if err != nil {
		return fmt.Errorf("kernel %q: %w", k.Name, err)
	}
	c.launches.Add(1)
	c.last.Store(k)
	return nil
}

// RunReserved is Run of a reservation's ticket, tk, once it is due: where
// the stream's Close began while the reservation waited, the ticket is
// cancelled (its charge given back) and nothing is launched. The caller
// is in the tenant's life lock.
func (c *Core) RunReserved(tk *admission.Ticket, k *modules.Kernel, grid, block cuda.Dim3, shmem uint32, args *cuda.Args) error {
	if c.closed.Load() {
		tk.Cancel()
		return errs.ErrClosed
	}
	return c.Run(tk, k, grid, block, shmem, args)
}

// Queue queues an admitted launch through the pool's launcher
// (internal/place), which takes no closure on the usual paths, and counts
// it; the caller is in the tenant's life lock.
func (c *Core) Queue(k *modules.Kernel, grid, block cuda.Dim3, shmem uint32, args *cuda.Args) error {
	if err := c.launcher.Launch(c.place, k.H, grid, block, shmem, c.Handle(), args); err != nil {
		if errors.Is(err, errs.ErrNotComputed) {
			c.launches.Add(1) // launched all the same, just not modelled
		}
		return fmt.Errorf("kernel %q: %w", k.Name, err)
	}
	if c.capture.Load() == nil {
		c.launches.Add(1)
		c.last.Store(k)
	}
	return nil
}

// Reserve charges a launch of k as grid x block now, going into debt if
// the buckets do not hold it (admission.Gate.Reserve).
func (c *Core) Reserve(k *modules.Kernel, grid, block cuda.Dim3) (admission.Reservation, error) {
	var w admission.Work
	w.Of(grid, block, &k.Est, &k.Bytes)
	return c.gate.Reserve(&w)
}

// LaunchGraph queues e on the stream after admitting it through the
// stream's gate, like a kernel; the caller is in the tenant's life lock,
// whose layout is layout now. e is refused where its tenant's SMs have
// moved since it was captured (graphs.Exec.Layout says why): a Reshape,
// or for any placement a new layout number; the caller's life lock keeps
// them from moving until it leaves. A graph launched into a capture runs
// later, untimed; a timed one is queued between its ticket's events.
func (c *Core) LaunchGraph(ctx context.Context, e *graphs.Exec, layout int32) error {
	// The life lock before e's, as GraphExec.Close takes them; and e's
	// layout is checked once in it: a launch that waited at a Reshape's
	// gate finds the new one.
	if err := e.Enter(); err != nil {
		return err
	}
	defer e.Exit()
	if e.Layout() != layout {
		return fmt.Errorf("%w: the tenant's SMs changed since this graph was captured (it has %d now), and a graph runs on the SMs it was captured for; capture it again (Stream.Capture) after a Reshape",
			errs.ErrStaleGraph, c.place.SMs())
	}
	tk, err := c.gate.AdmitGraph(ctx, e.Work(), c.capture.Load() == nil)
	if err != nil {
		return err
	}
	// In the life lock already: not entered again, which would wait at a
	// Reshape's gate while the Reshape waited for the first entry.
	l := c.launcher
	if tk.Timed() {
		err = e.LaunchTimed(l.Dev.Primary(), &tk, c.Handle())
	} else {
		err = place.Unscoped(l.Probe, c.place, l.Dev, l.Log, func(cc cuda.Context) error {
			return e.Launch(cc, c.Handle())
		})
	}
	if err != nil {
		return err
	}
	c.launches.Add(uint64(e.Kernels()))
	return nil
}
