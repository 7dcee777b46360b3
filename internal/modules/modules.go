// Package modules is a tenant's loaded code: its modules, each loaded
// once with the device's primary context (which serves every green stream
// of the device on that stream's SMs: docs/CONTEXTS.md), its PTX text read
// first for the kernels' parameter layouts; the kernels looked up in them,
// with what each launch is checked and charged by (Kernel); and the list
// of what is loaded, so that the tenant's Close unloads every module,
// exactly once. fcsp's Module and Function hold what this package makes
// and decide in which of the tenant's calls each driver call is made.
package modules

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/ptxsig"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Set is one tenant's loaded modules, guarded by its tenant's lock (mu,
// given to Load and Close), which also guards the tenant's list of
// streams: a Set is a slice in the tenant, which is made and closed at a
// server's request rate. Modules are listed inside calls the tenant
// counts in flight, and Close, made once those calls have ended, unloads
// what is listed. The zero Set is empty.
type Set struct {
	loaded []cuda.Module // guarded by mu
}

// Module is a loaded module: its handle and its kernels' parameters.
type Module struct {
	h      cuda.Module
	params map[string]ptxsig.Layout // the kernels' parameters, from PTX text; nil for a cubin
}

// Read reads image for its kernels' parameters, which every launch is
// checked against, before the driver sees it (ptxsig.Layouts): PTX text
// (an image that begins with .version) that cannot be read is refused
// with errs.ErrInvalidArgument, saying where and what was expected. A
// cubin or fatbin is not read: its kernels' launches are the driver's to
// check.
func (m *Module) Read(image []byte) (err error) {
	m.params, err = ptxsig.Layouts(image)
	return err
}

// Load loads image, read into m (Read), through dev with ctx, and lists
// it in s under mu (no driver call is made under it); the caller is one of
// the tenant's calls, so that a Close racing the load waits for it, then
// unloads the module with the others.
func (s *Set) Load(m *Module, mu sync.Locker, dev *smpart.Device, ctx cuda.Context, image []byte) (err error) {
	if m.h, err = dev.LoadModule(ctx, image); err != nil {
		return err
	}
	mu.Lock()
	s.loaded = append(s.loaded, m.h)
	mu.Unlock()
	return nil
}

// Close takes what is listed off s under mu and unloads it through dev
// with ctx; the tenant's calls are over, so nothing is listed after it.
func (s *Set) Close(mu sync.Locker, dev *smpart.Device, ctx cuda.Context) error {
	mu.Lock()
	loaded := s.loaded
	s.loaded = nil
	mu.Unlock()
	var err error
	for _, h := range loaded {
		err = errors.Join(err, dev.UnloadModule(ctx, h))
	}
	return err
}

// Kernel is a kernel as its launches need it: fcsp's Function holds one.
type Kernel struct {
	H     cuda.Function
	Name  string
	Est   admission.Estimates // its GPU time per launch shape, on metered streams
	Bytes atomic.Uint64       // declared bytes per launch (Function.SetBytesMoved)

	Params ptxsig.Layout // the parameters' layout the PTX declares, checked at each launch (CheckArgs)
}

// Kernel makes k the kernel of m called name, looked up through dev with
// ctx. A module read from PTX text must declare it: where the driver finds
// a kernel the reader did not, their readings differ, and the launch
// check would check nothing (errs.ErrInvalidArgument).
func (m *Module) Kernel(k *Kernel, dev *smpart.Device, ctx cuda.Context, name string) (err error) {
	k.Name, k.Params = name, m.params[name]
	if k.H, err = dev.Function(ctx, m.h, name); err != nil {
		return err
	}
	if _, ok := m.params[name]; !ok && m.params != nil {
		return fmt.Errorf("%w: the driver has a kernel %q that the module's PTX declares no .entry of", errs.ErrInvalidArgument, name)
	}
	return nil
}

// CheckArgs refuses args that do not lie where the kernel's PTX says it
// reads its parameters (ptxsig.Layout).
func (k *Kernel) CheckArgs(args *cuda.Args) error {
	return k.Params.Check(k.Name, args.Offsets(), len(args.Bytes()))
}
