package fcsp

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/modules"
)

// Module is code loaded into a tenant's context.
type Module struct {
	t *tenantCore
	m modules.Module // its handle and its kernels' parameters, from PTX text
}

// Function is a kernel of a Module.
type Function struct {
	m *Module
	k modules.Kernel // its handle, name, estimates, declared bytes (bandwidth.go) and parameters' layout
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
	m := &Module{t: c}
	if err := m.m.Read(image); err != nil {
		return nil, err
	}
	if err := c.do(func(cc cuda.Context) error { return c.modules.Load(&m.m, &c.mu, c.pool.dev, cc, image) }); err != nil {
		return nil, err
	}
	return m, nil
}

// Function looks up the kernel called name.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{m: m}
	if err := m.t.do(func(cc cuda.Context) error { return m.m.Kernel(&f.k, m.t.pool.dev, cc, name) }); err != nil {
		return nil, m.t.fail("Module.Function", fmt.Errorf("kernel %q: %w", name, err))
	}
	return f, nil
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.k.Name }

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
	return s.Launch(ctx, &f.k, grid.cuda(), block.cuda(), shmem, &args.a, try)
}
