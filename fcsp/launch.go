package fcsp

import (
	"bytes"
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Module is code loaded into a tenant's context.
type Module struct {
	t     *tenantCore
	h     cuda.Module
	image []byte      // kept to load it again after Pool.Reset
	funcs []*Function // looked up so far, found again after Pool.Reset (under t.mu)
}

// Function is a kernel of a Module.
type Function struct {
	m    *Module
	h    cuda.Function
	name string
}

// LoadModule loads PTX (or a cubin) into the tenant's context.
func (c *tenantCore) LoadModule(image []byte) (*Module, error) {
	m := &Module{t: c, image: bytes.Clone(image)}
	err := c.do(func(ctx cuda.Context) (err error) {
		m.h, err = c.pool.drv.ModuleLoadData(ctx, image)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tenant %q: %w", c.name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.modules = append(c.modules, m)
	return m, nil
}

// Function looks up the kernel called name.
func (m *Module) Function(name string) (*Function, error) {
	f := &Function{m: m, name: name}
	err := m.t.do(func(ctx cuda.Context) (err error) {
		f.h, err = m.t.pool.drv.ModuleGetFunction(ctx, m.h, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("kernel %q: %w", name, err)
	}
	m.t.mu.Lock()
	m.funcs = append(m.funcs, f)
	m.t.mu.Unlock()
	return f, nil
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// Launch queues f on stream s as grid x block threads with shmem bytes of
// dynamic shared memory. It first charges the launch to the stream's and
// the tenant's token buckets, waiting while they are empty; ctx ends the
// wait (with ctx.Err(), nothing launched, nothing charged). A tenant's
// Close waits for launches in flight, a wait for tokens included.
func (s *Stream) Launch(ctx context.Context, f *Function, grid, block Dim3, shmem uint32, args *Args) error {
	if s.t.closed.Load() || s.closed.Load() {
		return ErrClosed
	}
	if args == nil {
		return fmt.Errorf("%w: launch of %q with nil *Args; pass &fcsp.Args{} for a kernel without parameters", ErrInvalidArgument, f.name)
	}
	if f.m.t != s.t {
		return fmt.Errorf("%w: kernel %q belongs to tenant %q, stream to %q", ErrInvalidArgument, f.name, f.m.t.name, s.t.name)
	}
	if !grid.Valid() || !block.Valid() {
		return fmt.Errorf("%w: launch of %q with grid %v, block %v; every dimension must be at least 1", ErrInvalidArgument, f.name, grid, block)
	}
	// Admission and launch run inside the tenant's life lock, so a Close
	// cannot end the tenant between a launch's charge and its launch.
	c := s.t
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.exit(slot)
	if err := s.admit(ctx, grid, block); err != nil {
		return err
	}
	if err := s.launchLocked(f, grid.cuda(), block.cuda(), shmem, &args.a); err != nil {
		return fmt.Errorf("tenant %q: launching %q: %w", s.t.name, f.name, err)
	}
	s.launches.Add(1)
	return nil
}

// launchLocked launches with no closure on the usual paths: the primary
// context's, and a green context's where the driver takes a launch with no
// context current. Only the first launch (the probe) and the serialised
// fallback go through doUnscopedLocked. The caller is in the life lock.
func (s *Stream) launchLocked(f *Function, grid, block cuda.Dim3, shmem uint32, args *cuda.Args) error {
	c := s.t
	drv := c.pool.drv
	switch {
	case c.part == nil:
		return drv.LaunchKernel(c.pool.dev.Primary(), f.h, grid, block, shmem, s.h, args)
	case c.pool.unscoped.launch.Load() == probeYes:
		return drv.LaunchKernel(0, f.h, grid, block, shmem, s.h, args)
	}
	return c.doUnscopedLocked(&c.pool.unscoped.launch, func(ctx cuda.Context) error {
		return drv.LaunchKernel(ctx, f.h, grid, block, shmem, s.h, args)
	})
}
