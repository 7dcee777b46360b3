package fcsp

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/streams"
)

// Stream is one of a tenant's CUDA streams with its class. Launches on it
// pass its gate: charged to its bucket (and the tenant's) unless its class
// bypasses, timed on a metered tenant.
//
// A Stream is a handle: the state it names is reused by a later NewStream
// once the stream is closed, so that a server making a stream per request
// makes 16 bytes of garbage a request rather than the whole stream's. A
// handle names one stream: once that stream is closed, by its Close or
// its tenant's, every call through the handle answers ErrClosed (Handle,
// Class and Launches their zero values), whatever stream uses the state
// now.
type Stream struct {
	c   *streamCore
	gen uint64 // the core's life this handle names
}

// streamCore is a stream: what a Stream names while it is open, its
// state and lives (internal/streams) beside its tenant.
type streamCore struct {
	t *tenantCore
	streams.Core
}

// streamCores keeps closed streams' cores for reuse (retire).
var streamCores = sync.Pool{New: func() any { return new(streamCore) }}

// errNoStream answers calls through a nil or zero *Stream.
var errNoStream = fmt.Errorf("%w: a nil or zero *Stream; take one from Tenant.NewStream, Tenant.Stream or Tenant.Adopt", errs.ErrInvalidArgument)

// acquire is the core h names, counted in its calls under way (release
// ends the count); ErrClosed once the stream h names was closed.
func (h *Stream) acquire() (*streamCore, error) {
	if h == nil || h.c == nil {
		return nil, errNoStream
	}
	if !h.c.Acquire(h.gen) {
		return nil, ErrClosed
	}
	return h.c, nil
}

// release ends a call that acquire counted.
func (s *streamCore) release() { s.Release() }

// handle is a new handle of the core's present life.
func (s *streamCore) handle() *Stream { return &Stream{c: s, gen: s.Gen()} }

// retire ends the core's life once it is destroyed and puts it back for
// reuse (streams.Core.Retire). Nothing but handles may still name it: the
// tenant's lists have let it go.
func (s *streamCore) retire(own bool) {
	if s.Retire(own) {
		s.t = nil
		streamCores.Put(s)
	}
}

// newStream makes a stream of class cl with the tenant's placement
// (first: the tenant's first stream), its gate opened (openStream).
func (c *tenantCore) newStream(cl Class, first bool) (*streamCore, error) {
	h, own, err := c.place.NewStream(first)
	if err != nil {
		return nil, err
	}
	return c.openStream(h, cl, true, own)
}

// openStream is the core of stream h of class cl (owned and fromPart as
// streams.Core.Set says), its gate opened; where the gate fails, the
// stream is destroyed (an adopted one only forgotten) and its core
// retired.
func (c *tenantCore) openStream(h cuda.Stream, cl Class, owned, fromPart bool) (*streamCore, error) {
	s := streamCores.Get().(*streamCore)
	s.t = c
	s.Set(h, cl, owned, fromPart, &c.pool.launcher, c.place.Placement)
	if err := s.Open(c.adm); err != nil {
		_ = s.destroy(c.pool.dev.Primary())
		s.retire(false)
		return nil, err
	}
	return s, nil
}

// NewStream adds a stream of class cl to the tenant.
func (t *Tenant) NewStream(cl Class) (*Stream, error) {
	defer runtime.KeepAlive(t)
	c := t.c
	if err := checkClass(cl); err != nil {
		return nil, c.fail("NewStream", err)
	}
	s, err := c.addStream(func() (*streamCore, error) { return c.newStream(cl, false) })
	if err != nil {
		return nil, c.fail("NewStream", err)
	}
	return s, nil
}

// checkClass refuses a class that is not one of the Class constants.
func checkClass(cl Class) error {
	if cl.Valid() {
		return nil
	}
	return fmt.Errorf("%w: stream class %v; want ClassDefault, ClassAttention, ClassMemcpy or ClassNCCL (default, attention, memcpy, nccl)", ErrInvalidArgument, cl)
}

// Adopt wraps a stream created elsewhere (for example the one an NCCL
// communicator uses) so that launches through the SDK are classified. Its
// class is the one given to Pool.RegisterStream, else cl. The SDK does not
// destroy adopted streams. Handle 0 (the legacy NULL stream, which
// synchronises with every other) and a class that is not one of the
// Class constants are ErrInvalidArgument.
func (t *Tenant) Adopt(handle uintptr, cl Class) (*Stream, error) {
	defer runtime.KeepAlive(t)
	c := t.c
	s, err := c.adopt(handle, cl)
	if err != nil {
		return nil, c.fail("Adopt", err)
	}
	return s, nil
}

// adopt is Adopt, its errors bare.
func (c *tenantCore) adopt(handle uintptr, cl Class) (*Stream, error) {
	if handle == 0 {
		return nil, fmt.Errorf("%w: stream handle 0, the NULL stream; adopt a stream made with cuStreamCreate", ErrInvalidArgument)
	}
	if reg, ok := c.pool.registry.Lookup(handle); ok {
		cl = reg
	}
	if err := checkClass(cl); err != nil {
		return nil, err // a class's figures are kept in arrays of the defined ones
	}
	return c.addStream(func() (*streamCore, error) { return c.openStream(cuda.Stream(handle), cl, false, false) })
}

// addStream lists the stream mk makes and hands out its handle. In the
// life lock until the stream is listed, so that a racing Close waits and
// then destroys it; and the pool is not lost, no Reset replaces the
// partition, and no Reshape switches its streams, meanwhile.
func (c *tenantCore) addStream(mk func() (*streamCore, error)) (*Stream, error) {
	var h *Stream
	err := c.call(func() error {
		s, err := mk()
		if err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.streams = append(c.streams, s)
		h = s.handle()
		return nil
	})
	return h, err
}

// Handle is the CUstream, for other bindings; 0 once the stream is closed.
// After Tenant.Reshape it is another stream (of the new layout): take it
// again after a reshape.
func (h *Stream) Handle() uintptr {
	s, err := h.acquire()
	if err != nil {
		return 0
	}
	defer s.release()
	return uintptr(s.h())
}

// h is the stream's current CUstream, marked used (streams.Core.Handle).
func (s *streamCore) h() cuda.Stream { return s.Handle() }

// Class is the stream's class (ClassDefault once the stream is closed).
func (h *Stream) Class() Class {
	s, err := h.acquire()
	if err != nil {
		return ClassDefault
	}
	defer s.release()
	return s.Core.Class()
}

// Launches counts kernels launched on the stream through the SDK (0 once
// the stream is closed).
func (h *Stream) Launches() uint64 {
	s, err := h.acquire()
	if err != nil {
		return 0
	}
	defer s.release()
	return s.Core.Launches()
}

// Synchronize waits for everything queued on the stream.
func (h *Stream) Synchronize() error {
	s, err := h.acquire()
	if err != nil {
		return err
	}
	defer s.release()
	return s.t.fail("Stream.Synchronize", s.wait(nil))
}

// wait is Synchronize in the pool's host wait (internal/hostwait); done, where
// not nil, ends a polled wait early with hostwait.ErrEnded.
func (s *streamCore) wait(done <-chan struct{}) error {
	if s.Closed() {
		return ErrClosed
	}
	start := s.t.class.Begin() // a latency class's requests steer its SMs; others' class is nil
	// Counted as a wait: a Reshape does not wait for it (the handle read
	// here stays valid, and covers what was queued before), Close does.
	slot, err := s.t.enterWait()
	if err == nil {
		err = s.hostWait(done)
		s.t.life.ExitWait(slot)
	}
	s.t.class.End(start, err == nil)
	if err == nil {
		s.Gate().AfterSync() // a latency stream's neighbours are released now
	}
	return err
}

// hostWait waits for the stream's work in the pool's host wait, outside
// any tenant's context (unscoped): the one driver wait of Synchronize and
// of the memory engine's (memStream.Synchronize), which count it each
// their own way.
func (s *streamCore) hostWait(done <-chan struct{}) error {
	p := s.t.pool
	return s.t.unscoped(&p.unscoped.sync, func(cc cuda.Context) error { return p.wait(p.drv, cc, s.h(), s.Waits(), done) })
}

// destroy closes the stream's gate (unless its Close did), expires its
// handles, keeps its counters and then releases a primary-context
// CUstream for reuse; a partition's own streams are released through the
// partition. Its caller retires it next.
func (s *streamCore) destroy(cc cuda.Context) error {
	shut := s.Destroy(cc)
	c := s.t
	c.mu.Lock()
	s.AddTo(&c.gone)
	c.mu.Unlock()
	return errors.Join(shut, s.ReleaseHandle()) // no garbage when both are nil
}

// releaseShared gives the commons back a closing tenant's stream, which
// outlives it there (a partition's go with the partition); its calls are
// over.
func (c *tenantCore) releaseShared(s *streamCore) error {
	if c.place.Partitioned() { // the whole device's are not owned
		return nil
	}
	return s.DestroyOwn()
}

// Close waits for the stream, gives the blocks on its free list back to the
// tenant's pool, and destroys it; an adopted stream is only forgotten (its
// owner destroys it). A server that makes a stream per request closes it
// when the request ends. The tenant's first stream lives as long as the
// tenant. Calls on a closed stream return ErrClosed; as with any CUDA
// stream, it must not be closed while another goroutine still uses it.
// Close is idempotent.
func (h *Stream) Close() error {
	s, err := h.acquire()
	if errors.Is(err, ErrClosed) {
		return nil // an earlier Close, or the tenant's, did
	} else if err != nil {
		return err
	}
	c := s.t // before close, which retires s
	return c.fail("Stream.Close", s.close())
}

// close is Stream.Close of s, acquired by the caller: it releases s
// (streams.Core.Close says in which order). Its errors are bare.
func (s *streamCore) close() error {
	c := s.t
	if s == c.first.c {
		s.release()
		return errFirstStream
	}
	done, err := s.Close((*host)(c), func() error {
		c.mu.Lock()
		c.streams = slices.DeleteFunc(c.streams, func(x *streamCore) bool { return x == s })
		s.AddTo(&c.gone)
		c.mu.Unlock()
		return c.mem.Flush((*memStream)(s))
	})
	if done {
		s.retire(false)
	}
	return err
}

// errFirstStream answers Stream.Close of the tenant's first stream.
var errFirstStream = fmt.Errorf("%w: the tenant's first stream closes with the tenant (Tenant.Close)", errs.ErrInvalidArgument)
