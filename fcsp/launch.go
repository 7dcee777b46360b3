package fcsp

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/ptxsig"
	"github.com/fcsp-go/fcsp-go/internal/streams"
)

// Module is code loaded into a tenant's context.
type Module struct {
	t *tenantCore
	h cuda.Module

	params map[string]ptxsig.Layout // the kernels' parameters, from PTX text; nil for a cubin
}

// Function is a kernel of a Module.
type Function struct {
	m *Module
	k streams.Kernel // its handle, name, estimates, declared bytes (bandwidth.go) and parameters' layout
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
	f := &Function{m: m, k: streams.Kernel{Name: name, Params: m.params[name]}}
	err := m.t.do(func(cc cuda.Context) (err error) {
		f.k.H, err = m.t.pool.dev.Function(cc, m.h, name)
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
