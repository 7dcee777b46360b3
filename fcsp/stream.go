package fcsp

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/hostwait"
)

// Stream is one of a tenant's CUDA streams with its class. Launches on it
// pass its gate: charged to its bucket (and the tenant's) unless its class
// bypasses, timed on a metered tenant.
type Stream struct {
	t        *tenantCore
	hv       atomic.Uintptr // the CUstream; Tenant.Reshape swaps it (reshape.go)
	class    Class
	gate     admission.Gate // chosen once, in newStream or Adopt
	owned    bool           // created by the SDK (destroyed on Close)
	fromPart bool           // the partition's own stream: the partition destroys it
	launches atomic.Uint64
	waits    hostwait.History          // how long its Synchronizes lasted: a long one sleeps
	blocks   devmem.Blocks             // freed pool blocks for reuse on this stream (memory.go)
	capture  atomic.Pointer[capturing] // non-nil while Capture runs (graph.go)
	closed   atomic.Bool
	// used: the handle was taken (h), for the driver or for the caller, so
	// work may be queued on it and Close waits for it. A stream made and
	// closed unused is kept for reuse with no driver call.
	used atomic.Bool
}

func (c *tenantCore) newStream(class Class, first bool) (*Stream, error) {
	s := &Stream{t: c, class: class, owned: true}
	h, own, err := c.place.NewStream(first)
	s.fromPart = own
	s.hv.Store(uintptr(h))
	if err != nil {
		return nil, err
	}
	if err := c.adm.Init(&s.gate, class, &s.hv, &s.closed); err != nil {
		_ = s.destroy(c.pool.dev.Primary())
		return nil, err
	}
	return s, nil
}

// NewStream adds a stream of class cl to the tenant.
func (t *Tenant) NewStream(cl Class) (*Stream, error) {
	defer runtime.KeepAlive(t)
	c := t.c
	if !cl.Valid() {
		return nil, fmt.Errorf("%w: stream class %v", ErrInvalidArgument, cl)
	}
	return c.addStream(func() (*Stream, error) { return c.newStream(cl, false) })
}

// Adopt wraps a stream created elsewhere (for example the one an NCCL
// communicator uses) so that launches through the SDK are classified. Its
// class is the one given to Pool.RegisterStream, else cl. The SDK does not
// destroy adopted streams.
func (t *Tenant) Adopt(handle uintptr, cl Class) (*Stream, error) {
	defer runtime.KeepAlive(t)
	c := t.c
	return c.addStream(func() (*Stream, error) {
		if reg, ok := c.pool.registry.Lookup(handle); ok {
			cl = reg
		}
		s := &Stream{t: c, class: cl}
		s.hv.Store(handle)
		return s, c.adm.Init(&s.gate, cl, &s.hv, &s.closed)
	})
}

// addStream lists the stream mk makes. In the life lock until the stream
// is listed, so that a racing Close waits and then destroys it; and the
// pool is not lost, no Reset replaces the partition, and no Reshape
// switches its streams, meanwhile.
func (c *tenantCore) addStream(mk func() (*Stream, error)) (*Stream, error) {
	slot, err := c.enter()
	if err != nil {
		return nil, err
	}
	defer c.life.Exit(slot)
	s, err := mk()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.streams = append(c.streams, s)
	return s, nil
}

// Handle is the CUstream, for other bindings. After Tenant.Reshape it is
// another stream (of the new layout): take it again after a reshape.
func (s *Stream) Handle() uintptr { return uintptr(s.h()) }

// h is the stream's current CUstream.
func (s *Stream) h() cuda.Stream {
	if !s.used.Load() {
		s.used.Store(true)
	}
	return cuda.Stream(s.hv.Load())
}

// Class is the stream's class.
func (s *Stream) Class() Class { return s.class }

// Launches counts kernels launched on the stream through the SDK.
func (s *Stream) Launches() uint64 { return s.launches.Load() }

// Synchronize waits for everything queued on the stream.
func (s *Stream) Synchronize() error {
	return s.wait(nil)
}

// wait is Synchronize in the pool's host wait (internal/hostwait); done, where
// not nil, ends a polled wait early with hostwait.ErrEnded.
func (s *Stream) wait(done <-chan struct{}) error {
	if s.closed.Load() {
		return ErrClosed
	}
	p := s.t.pool
	err := s.t.doUnscoped(&p.unscoped.sync, func(ctx cuda.Context) error { return p.wait(p.drv, ctx, s.h(), &s.waits, done) })
	if err == nil {
		s.gate.AfterSync() // a latency stream's neighbours are released now
	}
	return err
}

func (s *Stream) destroy(ctx cuda.Context) error {
	var released error
	if s.owned && !s.fromPart {
		h := cuda.Stream(s.hv.Load())
		if s.used.Load() {
			released = s.t.pool.dev.ReleaseStream(h)
		} else {
			released = s.t.pool.dev.ReleaseUnused(h)
		}
	}
	return errors.Join(released, s.gate.Close(ctx)) // no garbage when both are nil
}

// Close waits for the stream, gives the blocks on its free list back to the
// tenant's pool, and destroys it; an adopted stream is only forgotten (its
// owner destroys it). A server that makes a stream per request closes it
// when the request ends. The tenant's first stream lives as long as the
// tenant. Calls on a closed stream return ErrClosed; as with any CUDA
// stream, it must not be closed while another goroutine still uses it.
// Close is idempotent.
func (s *Stream) Close() error {
	c := s.t
	if s == c.first {
		return fmt.Errorf("%w: tenant %q's first stream closes with the tenant", ErrInvalidArgument, c.name)
	}
	slot, err := c.enter()
	if errors.Is(err, ErrClosed) {
		return nil // the tenant's Close destroyed it
	} else if err != nil {
		return err // the device is lost: the stream stays, Reset makes it again
	}
	defer c.life.Exit(slot)
	if !s.closed.CompareAndSwap(false, true) {
		return nil // an earlier Close did
	}
	c.mu.Lock()
	c.streams = slices.DeleteFunc(c.streams, func(x *Stream) bool { return x == s })
	c.mu.Unlock()
	flushed := c.mem.Flush((*memStream)(s))
	// destroy handles the bucket and a primary-context stream; a
	// partition's own streams are destroyed through the partition.
	destroyed := s.destroy(c.pool.dev.Primary())
	var released error
	if s.owned && s.fromPart {
		released = c.place.DestroyStream(cuda.Stream(s.hv.Load()), !s.used.Load())
	}
	return errors.Join(flushed, destroyed, released) // no garbage when all are nil
}
