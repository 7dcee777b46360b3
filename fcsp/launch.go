package fcsp

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/ptxsig"
)

// Module is code loaded into a tenant's context.
type Module struct {
	t *tenantCore
	h cuda.Module

	params map[string]ptxsig.Layout // the kernels' parameters, from PTX text; nil for a cubin
}

// Function is a kernel of a Module.
type Function struct {
	m     *Module
	h     cuda.Function
	name  string
	est   admission.Estimates // its GPU time per launch shape, on metered streams
	bytes atomic.Uint64       // declared bytes per launch (bandwidth.go)

	params ptxsig.Layout // the parameters' layout the PTX declares, checked at each launch (checkArgs)
}

// LoadModule loads PTX (or a cubin) for the tenant's kernels, once, with
// the device's primary context, which serves every green stream of the
// device on that stream's SMs (docs/CONTEXTS.md): one module serves every
// layout of a reshapable tenant.
//
// PTX text (an image that begins with .version) is read first, for the
// kernels' parameters, which every launch is checked against: text that
// cannot be read (a declaration the reader does not understand, a size
// past the driver's limits) is refused with ErrInvalidArgument, saying at
// which line and column and what was expected, before the driver sees it.
// A cubin or fatbin goes to the driver as it is, and its kernels' launches
// are the driver's to check.
func (c *tenantCore) LoadModule(image []byte) (*Module, error) {
	params, err := ptxsig.Layouts(image)
	if err != nil {
		return nil, err
	}
	m := &Module{t: c, params: params}
	err = c.do(func(cc cuda.Context) (err error) {
		if m.h, err = c.pool.dev.LoadModule(cc, image); err != nil {
			return err
		}
		// Listed in the life lock: a Close racing the load waits for it,
		// then unloads the module with the others.
		c.mu.Lock()
		c.modules = append(c.modules, m)
		c.mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// unload unloads the module.
func (m *Module) unload(cc cuda.Context) error { return m.t.pool.dev.UnloadModule(cc, m.h) }

// Function looks up the kernel called name.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{m: m, name: name, params: m.params[name]}
	err := m.t.do(func(cc cuda.Context) (err error) {
		f.h, err = m.t.pool.dev.Function(cc, m.h, f.name)
		return err
	})
	if err == nil && m.params != nil {
		if _, ok := m.params[name]; !ok {
			// The driver found a kernel the reader did not: their
			// readings differ, so the launch check would check nothing.
			err = fmt.Errorf("%w: the driver has a kernel %q that the module's PTX declares no .entry of", ErrInvalidArgument, name)
		}
	}
	if err != nil {
		return nil, m.t.fail("Module.Function", fmt.Errorf("kernel %q: %w", name, err))
	}
	return f, nil
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// Launch queues f on stream s as grid x block threads with shmem bytes of
// dynamic shared memory. It first charges the launch to the stream's and
// the tenant's token buckets, waiting while they are empty. ctx ends the
// wait (with ctx.Err(), nothing launched, nothing charged); a deadline the
// wait cannot meet fails at once (context.DeadlineExceeded), and closing
// the stream or tenant ends it with ErrClosed. A tenant's Close wakes a
// launch waiting for tokens and waits for it to leave.
func (h *Stream) Launch(ctx context.Context, f *Function, grid, block Dim3, shmem uint32, args *Args) error {
	s, err := h.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	if ctx == nil {
		return s.t.fail("Stream.Launch", errNilContext)
	}
	return s.t.fail("Stream.Launch", s.launch(ctx, f, grid, block, shmem, args, false))
}

// launch is Launch, and with try TryLaunch.
func (s *streamCore) launch(ctx context.Context, f *Function, grid, block Dim3, shmem uint32, args *Args, try bool) error {
	if err := s.checkLaunch(f, grid, block, args); err != nil {
		return err
	}
	// Admission and launch run inside the tenant's life lock, so a Close
	// cannot end the tenant between a launch's charge and its launch; Close
	// closes the limiter first, which wakes a waiting admission.
	c := s.t
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.Exit(slot)
	// A captured kernel is charged when its graph launches; a free gate
	// (unlimited, unmetered) admits everything.
	if s.capture.Load().Record(grid.cuda(), block.cuda()) || s.gate.Free() {
		return s.launchCounted(f, grid, block, shmem, args)
	}
	return s.admitAndRun(ctx, f, grid, block, shmem, args, try)
}

// admitAndRun admits a launch (with try, without waiting) and queues it,
// timed where the ticket says. The caller is in the life lock.
func (s *streamCore) admitAndRun(ctx context.Context, f *Function, grid, block Dim3, shmem uint32, args *Args, try bool) error {
	var tk admission.Ticket
	var w admission.Work
	w.Of(grid.cuda(), block.cuda(), &f.est, &f.bytes)
	var err error
	if try {
		err = s.gate.TryAdmit(&w, &tk)
	} else {
		err = s.gate.Admit(ctx, &w, &tk)
	}
	if err != nil {
		return err
	}
	return s.run(&tk, f, grid, block, shmem, args)
}

// run queues an admitted launch: with a timed ticket between its events,
// with the primary context, which serves every green stream
// (docs/CONTEXTS.md): no green context is taken; else through
// launchCounted. The caller is in the life lock. Time holds the stream's
// meter across the launch (internal/admission; docs/LOCKS.md).
func (s *streamCore) run(tk *admission.Ticket, f *Function, grid, block Dim3, shmem uint32, args *Args) error {
	if !tk.Timed() {
		return s.launchCounted(f, grid, block, shmem, args)
	}
	ctx := s.t.pool.dev.Primary()
	// Time holds the stream's meter from the ticket's start event to its
	// end event, across this launch: no other timed work comes between.
	err := tk.Time(ctx, func() error {
		return s.t.pool.launcher.LaunchIn(ctx, f.h, grid.cuda(), block.cuda(), shmem, s.h(), &args.a)
	})
	if err != nil {
		return fmt.Errorf("kernel %q: %w", f.name, err)
	}
	s.launches.Add(1)
	s.lastFn.Store(f)
	return nil
}

// launchCounted queues an admitted launch through the pool's launcher
// (internal/place), which takes no closure on the usual paths, and counts
// it; the caller is in the life lock.
func (s *streamCore) launchCounted(f *Function, grid, block Dim3, shmem uint32, args *Args) error {
	if err := s.t.pool.launcher.Launch(s.t.place.Placement, f.h, grid.cuda(), block.cuda(), shmem, s.h(), &args.a); err != nil {
		if errors.Is(err, ErrNotComputed) {
			s.launches.Add(1) // launched all the same, just not modelled
		}
		return fmt.Errorf("kernel %q: %w", f.name, err)
	}
	if s.capture.Load() == nil {
		s.launches.Add(1)
		s.lastFn.Store(f)
	}
	return nil
}
