package fcsp

import (
	"context"
	"fmt"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
)

// openMemory gives the tenant its memory engine, which internal/devmem
// chooses by the options: plain cuMemAlloc/cuMemFree with
// WithoutMemoryPool, else a pool of its own with its streams' free lists in
// front of it. quota is the tenant's (the device's limit where none was
// asked for).
func (c *tenantCore) openMemory(cfg *tenantConfig, quota uint64) (err error) {
	p := c.pool
	c.mem, err = devmem.Open(devmem.Config{
		Driver: p.drv, Device: p.dev, Account: c.acct, Tracker: p.mem, Peers: &p.pools, Info: &p.memInfo,
		Owner: (*host)(c), Probe: &p.unscoped.pool,
	}, devmem.PoolConfig{Plain: cfg.Plain, Green: c.place.Partitioned(), Quota: quota, Explicit: cfg.Quota != 0, Keep: cfg.Keep, NoLists: cfg.NoLists})
	if err == nil {
		c.memOps = c.mem.Ops()
	}
	return err
}

// memStream is a Stream as the memory engine sees it (devmem.Stream): its
// Handle, Blocks and Capturing are its core's (internal/streams).
type memStream streamCore

// Idle queries the stream (cuStreamQuery: no wait) for a caller counted in
// the life lock; a capturing stream is not queried, which would end its
// capture.
func (s *memStream) Idle() bool {
	if s.Capturing() || s.Closed() {
		return false
	}
	sc := (*streamCore)(s)
	p := s.t.pool
	return s.t.unscoped(&p.unscoped.sync, func(cc cuda.Context) error { return p.dev.QueryStream(cc, sc.h()) }) == nil
}

// Synchronize is streamCore.wait for the engine, whose caller is counted in
// the tenant's life lock already: it does not count itself in again, which
// a Reshape's pause between the two entries would make wait for itself.
func (s *memStream) Synchronize() error {
	if s.Closed() {
		return nil // its Close, racing a Trim, flushes its blocks: nothing to wait for
	}
	err := (*streamCore)(s).hostWait(nil)
	if err == nil {
		s.Gate().AfterSync() // a latency stream's neighbours are released now
	} else if s.Closed() {
		return nil
	}
	return err
}

// TryEnter is enter for a neighbour's trim (devmem.Owner): it never waits
// at a Reshape's gate (life.Lock.TryEnter); a paused, closing or lost
// tenant is not trimmed.
func (h *host) TryEnter() (uint32, bool) {
	c := (*tenantCore)(h)
	slot, ok := c.life.TryEnter()
	if ok && (c.closed.Load() || c.pool.fault.Err() != nil) {
		c.life.Exit(slot)
		return 0, false
	}
	return slot, ok
}

// Streams lists the tenant's streams for the memory engine, each kept
// from reuse (its calls under way counted, as a handle's call is) until
// ReleaseStreams: a Stream.Close meanwhile waits for the list before its
// core serves another stream.
func (h *host) Streams() []devmem.Stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := make([]devmem.Stream, len(h.streams))
	for i, s := range h.streams {
		s.Keep()
		l[i] = (*memStream)(s)
	}
	return l
}

// ReleaseStreams gives back a list Streams made.
func (h *host) ReleaseStreams(l []devmem.Stream) {
	for _, s := range l {
		(*streamCore)(s.(*memStream)).release()
	}
}

// Alloc is Tenant.Alloc, for the SDK's own callers.
func (c *tenantCore) Alloc(ctx context.Context, n uint64) (DevicePtr, error) {
	if err := ctxErr(ctx); err != nil {
		return 0, err
	}
	if c.closed.Load() {
		return 0, ErrClosed
	}
	return c.alloc(c.first.c, n)
}

// alloc is devmem.Alloc on s: n checked, counted in the tenant's life
// lock from the quota check to the record.
func (c *tenantCore) alloc(s *streamCore, n uint64) (DevicePtr, error) {
	p, err := devmem.Alloc(c.mem, (*memStream)(s), n)
	return DevicePtr(p), err
}

// Free is Tenant.Free, for the SDK's own callers.
func (c *tenantCore) Free(p DevicePtr) error {
	return c.free(c.first.c, p)
}

// free is devmem.Free on s, counted in the tenant's life lock.
func (c *tenantCore) free(s *streamCore, p DevicePtr) error {
	return devmem.Free(c.mem, (*memStream)(s), cuda.DevicePtr(p))
}

// AllocAsync is Tenant.AllocAsync, for the SDK's own callers.
func (c *tenantCore) AllocAsync(h *Stream, n uint64) (DevicePtr, error) {
	s, err := c.ownStream(h)
	if err != nil {
		return 0, err
	}
	defer s.release()
	return c.alloc(s, n)
}

// ownStream is the core of h, acquired (the caller releases it), where h
// is one of the tenant's open streams.
func (c *tenantCore) ownStream(h *Stream) (*streamCore, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: a nil *Stream; pass one of the tenant's streams", ErrInvalidArgument)
	}
	s, err := h.acquire()
	if err != nil {
		return nil, err
	}
	if s.t != c {
		other := s.t.name
		s.release()
		return nil, fmt.Errorf("%w: the stream is %s's; pass one of the tenant's own streams", ErrInvalidArgument, tenantName(other))
	}
	if s.Closed() {
		s.release()
		return nil, ErrClosed
	}
	return s, nil
}

// FreeAsync is Tenant.FreeAsync, for the SDK's own callers.
func (c *tenantCore) FreeAsync(h *Stream, p DevicePtr) error {
	s, err := c.ownStream(h)
	if err != nil {
		return err
	}
	defer s.release()
	return c.free(s, p)
}

// Trim gives the tenant's cached memory back to the driver: its streams'
// free lists, then its pool's cache, after waiting for the streams that
// freed blocks (and the first). It is a no-op without a pool.
func (t *Tenant) Trim() error {
	defer runtime.KeepAlive(t)
	c := t.c
	if c.closed.Load() {
		return c.fail("Trim", ErrClosed)
	}
	return c.fail("Trim", c.mem.Trim())
}

// MemGetInfo is what cuMemGetInfo should tell code running as this tenant:
// total is its quota (at most the device's), free what remains of it, at
// most what the device limit leaves (where the tenants' pools' chunks
// count) and what the device has free, read again after any change the
// pool's tenants made to what they hold. Code that sizes a KV cache from
// free memory then sizes it to the tenant, not the card.
func (t *Tenant) MemGetInfo() (free, total uint64, err error) {
	defer runtime.KeepAlive(t)
	c := t.c
	free, total, err = c.memOps.MemInfo(c.cachedBytes)
	return free, total, c.fail("MemGetInfo", err)
}

// cachedBytes is the size of the blocks on the tenant's streams' free
// lists (Stats.MemoryCached), without the rest of Stats.
func (c *tenantCore) cachedBytes() (n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.streams {
		n += s.Blocks().Bytes()
	}
	return n
}

// CopyToDevice copies src into device memory at dst. Where dst lies in a
// block the SDK allocated (any tenant's), the copy must end inside that
// block: one that runs past its end fails with ErrOutOfRange, naming the
// block's size, the offset and the length, and the driver never sees it
// (on a GPU a tenant's pool maps memory a chunk at a time, and the driver
// would let such a copy reach the next block). A pointer the SDK did not
// allocate is passed to the driver unchecked, as it always was.
func (t *Tenant) CopyToDevice(dst DevicePtr, src []byte) error {
	defer runtime.KeepAlive(t)
	c := t.c
	return c.fail("CopyToDevice", c.memOps.CopyToDevice(cuda.DevicePtr(dst), src))
}

// CopyFromDevice copies device memory at src into dst, checked as
// CopyToDevice's copy is.
func (t *Tenant) CopyFromDevice(dst []byte, src DevicePtr) error {
	defer runtime.KeepAlive(t)
	c := t.c
	return c.fail("CopyFromDevice", c.memOps.CopyFromDevice(dst, cuda.DevicePtr(src)))
}
