package fcsp

import (
	"context"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/bytesize"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/dorun"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Current is what a function run by Tenant.Do may hand to a library: the
// tenant's context and streams as driver handles, the number of SMs its
// partition holds, and workspace memory from its quota. It is valid during
// that call of f.
type Current struct {
	t  *tenantCore
	in dorun.In // where f runs: its context, metering, thread and size (internal/dorun)
}

// ContextHandle is a CUcontext. In cgo, C.CUcontext(h.Pointer()).
type ContextHandle struct{ h cuda.Context }

// Pointer is the handle as the unsafe.Pointer a cgo call takes. It is the
// driver's own pointer, not Go memory.
func (h ContextHandle) Pointer() unsafe.Pointer { return cuda.Pointer(h.h) }

// Uintptr is the handle as an integer, for bindings that take one.
func (h ContextHandle) Uintptr() uintptr { return uintptr(h.h) }

// String is the handle as a hexadecimal address, as DevicePtr prints.
func (h ContextHandle) String() string { return fmt.Sprintf("%#x", uintptr(h.h)) }

// StreamHandle is a CUstream (cudaStream_t). In cgo, C.CUstream(h.Pointer()).
type StreamHandle struct{ h cuda.Stream }

// Pointer is the handle as the unsafe.Pointer a cgo call takes.
func (h StreamHandle) Pointer() unsafe.Pointer { return cuda.Pointer(h.h) }

// Uintptr is the handle as an integer.
func (h StreamHandle) Uintptr() uintptr { return uintptr(h.h) }

// String is the handle as a hexadecimal address, as DevicePtr prints.
func (h StreamHandle) String() string { return fmt.Sprintf("%#x", uintptr(h.h)) }

// Context is the context Do made current: one of the tenant's green
// contexts (as a CUcontext, from cuCtxFromGreenCtx) or the device's primary
// context. A partitioned tenant has several green contexts over the same
// SMs, one for each Do in flight, so two Dos may see different contexts:
// library handles (cuBLAS, cuDNN) made in one Do work in any other of the
// tenant's Dos, as measured on the H200 (docs/CONTEXTS.md).
func (cur Current) Context() ContextHandle { return ContextHandle{cur.in.Cur} }

// Stream is the handle of one of the tenant's streams. A nil h is not an
// error (unlike the SDK's other nil arguments): it means the tenant's
// first stream, the one Tenant.Stream returns. A stream of another tenant
// is ErrInvalidArgument, a closed one ErrClosed.
//
// On a metered tenant, taking the handle starts timing the stream for this
// Do (an event recorded on it now, another when f returns), and for every
// later Do of the tenant too, from its start: a library keeps the handle it
// was given (cuBLAS's cublasSetStream) and queues on it in later calls that
// take nothing from Current. The time from the start event to the first
// work queued counts as the Do's (a few microseconds). Work queued on a
// handle taken otherwise (Stream.Handle), outside Do, or on streams the SDK
// did not make is not metered.
func (cur Current) Stream(h *Stream) (StreamHandle, error) {
	if cur.t == nil {
		return StreamHandle{}, errZeroCurrent
	}
	if !cur.in.Live(&cur.t.dos) {
		return StreamHandle{}, cur.t.fail("Current.Stream", admission.ErrTakenAfterDo)
	}
	if h == nil {
		h = &cur.t.first
	}
	s, err := cur.t.ownStream(h)
	if err != nil {
		return StreamHandle{}, cur.t.fail("Current.Stream", err)
	}
	defer s.release()
	if err := cur.in.Run.Take(s.Gate()); err != nil {
		return StreamHandle{}, cur.t.fail("Current.Stream", fmt.Errorf("timing the stream: %w", err))
	}
	return StreamHandle{s.h()}, nil
}

// SMs is how many SMs the tenant's partition holds (the whole device's for
// an unpartitioned tenant): tell libraries that size their launches for the
// card, such as cuBLAS (cublasSetSmCountTarget).
// Inside DoEach's runs in the contexts of another size (a reshapable
// tenant's warm-up), that size's.
func (cur Current) SMs() int {
	if cur.in.SMs != 0 {
		return cur.in.SMs
	}
	return cur.t.SMs()
}

// Workspace allocates n bytes for a library's scratch space on stream s
// (nil: the first stream), counted against the tenant's quota; see
// Tenant.AllocWorkspace. The memory outlives the Do, as a library handle
// that keeps it does: it stays charged to the tenant until Workspace.Close
// or the tenant's Close frees it.
func (cur Current) Workspace(s *Stream, n uint64) (*Workspace, error) {
	if cur.t == nil {
		return nil, errZeroCurrent
	}
	if !cur.in.Live(&cur.t.dos) {
		return nil, cur.t.fail("Current.Workspace", admission.ErrTakenAfterDo)
	}
	w, err := cur.t.AllocWorkspace(cur.in.Ctx, s, n)
	if err != nil {
		return nil, cur.t.fail("Current.Workspace", err)
	}
	return w, nil
}

// errZeroCurrent answers a Current that no Do made.
var errZeroCurrent = fmt.Errorf("%w: a zero Current; use the one Tenant.Do passes to its function", errs.ErrInvalidArgument)

// Workspace is device memory handed to a library for its own use (cuBLAS's
// cublasSetWorkspace, a cuDNN workspace, what a TensorRT IGpuAllocator
// returns), taken from the tenant's quota and, with WithMemoryPool, its
// pool. Close it once the library no longer uses it (after cublasDestroy,
// or after setting another workspace); a tenant's Close frees any left.
type Workspace struct {
	t      *tenantCore
	s      *Stream
	p      DevicePtr
	n      uint64
	closed atomic.Bool
}

// AllocWorkspace is Tenant.AllocWorkspace.
func (c *tenantCore) AllocWorkspace(ctx context.Context, h *Stream, n uint64) (*Workspace, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if h == nil {
		h = &c.first
	}
	p, err := c.AllocAsync(h, n)
	if err != nil {
		return nil, err
	}
	return &Workspace{t: c, s: h, p: p, n: n}, nil
}

// Ptr is the workspace's device address.
func (w *Workspace) Ptr() DevicePtr { return w.p }

// Pointer is the address as the void* a cgo call takes (device memory, not
// Go memory).
func (w *Workspace) Pointer() unsafe.Pointer { return cuda.Pointer(uintptr(w.p)) }

// Size is the workspace's size in bytes.
func (w *Workspace) Size() uint64 { return w.n }

// String says where the workspace is, its size and its tenant:
// `workspace 0x7f2a00000000 (32 MiB) of tenant "batch"`, with ", closed"
// once closed.
func (w *Workspace) String() string {
	if w == nil || w.t == nil {
		return "workspace <nil>" // nil, or a zero Workspace no tenant made
	}
	s := fmt.Sprintf("workspace %v (%s) of %s", w.p, bytesize.Format(w.n), tenantName(w.t.name))
	if w.closed.Load() {
		s += ", closed"
	}
	return s
}

// Close frees the workspace in order on its stream. Idempotent.
func (w *Workspace) Close() error {
	if !w.closed.CompareAndSwap(false, true) {
		return nil
	}
	if s, err := w.s.acquire(); err == nil {
		defer s.release()
		if !s.Closed() {
			return w.t.fail("Workspace.Close", w.t.free(s, w.p))
		}
	}
	return w.t.fail("Workspace.Close", w.t.Free(w.p)) // its stream closed first: in order on the first
}
