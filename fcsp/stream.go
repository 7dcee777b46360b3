package fcsp

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/hostwait"
	"github.com/fcsp-go/fcsp-go/internal/spin"
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

// streamCore is a stream: what a Stream names while it is open.
type streamCore struct {
	t        *tenantCore
	hv       atomic.Uintptr // the CUstream; Tenant.Reshape swaps it (reshape.go)
	class    Class
	gate     admission.Gate // chosen once, in newStream or Adopt
	owned    bool           // created by the SDK (destroyed on Close)
	fromPart bool           // the partition's own stream: the partition destroys it
	launches atomic.Uint64
	lastFn   atomic.Pointer[Function] // the last kernel launched (a stall's report), beside launches: one line for both
	// gen counts the core's lives; a handle names one (acquire). inflight
	// counts the calls made through a handle that are under way: a core
	// is reused only once none is (retire), so that a call racing the
	// stream's Close, which CUDA itself forbids, can still not reach the
	// stream that reuses it, another tenant's perhaps. Beside launches,
	// which a launch writes too: one line for both.
	inflight atomic.Int32
	gen      atomic.Uint64
	waits    hostwait.History          // how long its Synchronizes lasted: a long one sleeps
	blocks   devmem.Blocks             // freed pool blocks for reuse on this stream (memory.go)
	capture  atomic.Pointer[capturing] // non-nil while Capture runs (graph.go)
	closed   atomic.Bool
	// used: the handle was taken (h), for the driver or for the caller, so
	// work may be queued on it and Close waits for it. A stream made and
	// closed unused is kept for reuse with no driver call.
	used atomic.Bool
	// watching: the stall watchdog looks at the stream now; a capture
	// begins only once it is done (a query or an event breaks a capture).
	watching atomic.Bool
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
	s := h.c
	s.inflight.Add(1)
	if s.gen.Load() != h.gen {
		s.inflight.Add(-1)
		return nil, ErrClosed
	}
	return s, nil
}

// release ends a call that acquire counted.
func (s *streamCore) release() { s.inflight.Add(-1) }

// handle is a new handle of the core's present life.
func (s *streamCore) handle() *Stream { return &Stream{c: s, gen: s.gen.Load()} }

// expire ends the core's life: handles of it answer ErrClosed from now
// on, and once the calls made through them have left (own: the caller is
// one of them, acquired, and leaves here) nothing reaches the CUstream
// through it. It comes before anything the stream holds is released for
// reuse: a call racing the stream's Close, which CUDA itself forbids, may
// be past its checks, and must still land on this stream, not on the one
// that takes its CUstream next (another tenant's, perhaps).
func (s *streamCore) expire(own bool) {
	s.gen.Add(1)
	if own {
		s.release()
	}
	// Calls that acquired before the gen moved are leaving: most within
	// microseconds, a Synchronize racing the Close when the GPU is done.
	spin.Until(func() bool { return s.inflight.Load() <= 0 }, 50*time.Microsecond)
}

// retire ends the core's life (expire) once it is destroyed, clears its
// fields and puts it back for reuse. Nothing but handles may still name
// it: the tenant's lists have let it go.
func (s *streamCore) retire(own bool) {
	s.expire(own) // at once when destroy expired it
	if s.gate.Listed() {
		return // a metered gate may still be polled through a list: the collector takes it
	}
	s.t, s.class, s.owned, s.fromPart = nil, 0, false, false
	s.gate = admission.Gate{}
	s.hv.Store(0)
	s.launches.Store(0)
	s.lastFn.Store(nil)
	s.waits.Reset()
	s.blocks = devmem.Blocks{} // flushed by Close; another tenant's blocks must never be handed out here
	s.capture.Store(nil)
	s.closed.Store(false)
	s.used.Store(false)
	streamCores.Put(s)
}

// streamTotals is what a tenant's closed streams counted, kept so that
// its Stats's counters only go up (a server closes a stream a request).
type streamTotals struct {
	launches uint64
	gates    admission.GateSums
}

// keepTotals adds s's counters to its tenant's closed streams' as s leaves
// the tenant's list (the caller holds the tenant's mu): its calls are over.
func (s *streamCore) keepTotals() {
	g := &s.t.gone
	g.launches += s.launches.Load()
	s.gate.AddTo(&g.gates)
}

func (c *tenantCore) newStream(class Class, first bool) (*streamCore, error) {
	s := streamCores.Get().(*streamCore)
	s.t, s.class, s.owned = c, class, true
	h, own, err := c.place.NewStream(first)
	s.fromPart = own
	s.hv.Store(uintptr(h))
	if err != nil {
		s.retire(false)
		return nil, err
	}
	if err := c.adm.Init(&s.gate, class, &s.hv, &s.closed); err != nil {
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
	return c.addStream(func() (*streamCore, error) {
		s := streamCores.Get().(*streamCore)
		s.t, s.class = c, cl
		s.hv.Store(handle)
		if err := c.adm.Init(&s.gate, cl, &s.hv, &s.closed); err != nil {
			_ = s.gate.Close(c.pool.dev.Primary())
			s.retire(false)
			return nil, err
		}
		return s, nil
	})
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

// h is the stream's current CUstream.
func (s *streamCore) h() cuda.Stream {
	if !s.used.Load() {
		s.used.Store(true)
	}
	return cuda.Stream(s.hv.Load())
}

// Class is the stream's class (ClassDefault once the stream is closed).
func (h *Stream) Class() Class {
	s, err := h.acquire()
	if err != nil {
		return ClassDefault
	}
	defer s.release()
	return s.class
}

// Launches counts kernels launched on the stream through the SDK (0 once
// the stream is closed).
func (h *Stream) Launches() uint64 {
	s, err := h.acquire()
	if err != nil {
		return 0
	}
	defer s.release()
	return s.launches.Load()
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
	if s.closed.Load() {
		return ErrClosed
	}
	p := s.t.pool
	start := s.t.class.Begin() // a latency class's requests steer its SMs; others' class is nil
	// Counted as a wait: a Reshape does not wait for it (the handle read
	// here stays valid, and covers what was queued before), Close does.
	slot, err := s.t.enterWait()
	if err == nil {
		err = s.t.unscoped(&p.unscoped.sync, func(cc cuda.Context) error { return p.wait(p.drv, cc, s.h(), &s.waits, done) })
		s.t.life.ExitWait(slot)
	}
	s.t.class.End(start, err == nil)
	if err == nil {
		s.gate.AfterSync() // a latency stream's neighbours are released now
	}
	return err
}

// destroy closes the stream's gate (unless its Close did: closed),
// expires its handles, keeps its counters and then releases a
// primary-context CUstream for reuse; a partition's own streams are
// released through the partition. Its caller retires it next.
func (s *streamCore) destroy(cc cuda.Context) error {
	var shut error
	if !s.closed.Load() {
		shut = s.gate.Close(cc)
	}
	s.expire(false)
	c := s.t
	c.mu.Lock()
	s.keepTotals()
	c.mu.Unlock()
	return errors.Join(shut, s.releaseHandle()) // no garbage when both are nil
}

// releaseShared gives the commons back a closing tenant's stream, which
// outlives it there (a partition's go with the partition); its calls are
// over.
func (c *tenantCore) releaseShared(s *streamCore) error {
	if c.place.Partitioned() || !s.owned || !s.fromPart { // the whole device's are not owned
		return nil
	}
	return c.place.DestroyStream(cuda.Stream(s.hv.Load()), !s.used.Load())
}

// releaseHandle gives a primary-context CUstream the SDK made back for
// reuse; its calls are over (expire).
func (s *streamCore) releaseHandle() error {
	if !s.owned || s.fromPart {
		return nil
	}
	h := cuda.Stream(s.hv.Load())
	if s.used.Load() {
		return s.t.pool.dev.ReleaseStream(h)
	}
	return s.t.pool.dev.ReleaseUnused(h)
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

// close is Stream.Close of s, acquired by the caller: it releases s. Its
// errors are bare.
func (s *streamCore) close() error {
	c := s.t
	if s == c.first.c {
		s.release()
		return errFirstStream
	}
	// First, in the life lock (so that the tenant's Close waits, and then
	// finds the stream still listed): the stream refuses new calls and its
	// gate wakes the launches waiting for tokens.
	slot, err := c.enter()
	if errors.Is(err, ErrClosed) {
		s.release()
		return nil // the tenant's Close destroys it
	} else if err != nil {
		s.release()
		return err // the device is lost: the stream stays, the tenant's Close destroys it
	}
	if !s.closed.CompareAndSwap(false, true) {
		c.life.Exit(slot)
		s.release()
		return nil // a Close racing this one is under way
	}
	shut := s.gate.Close(c.pool.dev.Primary())
	c.life.Exit(slot)
	// Then its handles expire and the calls under way leave, outside the
	// life lock: one may be waiting at a Reshape's gate, and the Reshape
	// for this Close's slot. Until they have, nothing of the stream is
	// released.
	s.expire(true)
	// Last, in the life lock again, the stream is unlisted and released.
	// A tenant's Close that began meanwhile found it listed and destroys
	// it (this Close may not touch it then).
	if slot, err = c.enter(); err != nil {
		if errors.Is(err, ErrClosed) {
			err = nil
		}
		return errors.Join(shut, err)
	}
	c.mu.Lock()
	c.streams = slices.DeleteFunc(c.streams, func(x *streamCore) bool { return x == s })
	s.keepTotals()
	c.mu.Unlock()
	flushed := c.mem.Flush((*memStream)(s))
	released := s.releaseHandle()
	if s.owned && s.fromPart {
		released = c.place.DestroyStream(cuda.Stream(s.hv.Load()), !s.used.Load())
	}
	c.life.Exit(slot)
	s.retire(false)
	return errors.Join(shut, flushed, released) // no garbage when all are nil
}

// errFirstStream answers Stream.Close of the tenant's first stream.
var errFirstStream = fmt.Errorf("%w: the tenant's first stream closes with the tenant (Tenant.Close)", errs.ErrInvalidArgument)
