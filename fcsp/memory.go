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

// memStream is a Stream as the memory engine sees it.
type memStream Stream

func (s *memStream) Handle() cuda.Stream    { return (*Stream)(s).h() }
func (s *memStream) Blocks() *devmem.Blocks { return &s.blocks }
func (s *memStream) Synchronize() error     { return (*Stream)(s).Synchronize() }

// Streams lists the tenant's streams for the memory engine.
func (h *host) Streams() []devmem.Stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := make([]devmem.Stream, len(h.streams))
	for i, s := range h.streams {
		l[i] = (*memStream)(s)
	}
	return l
}

// Alloc is Tenant.Alloc, for the SDK's own callers.
func (c *tenantCore) Alloc(ctx context.Context, n uint64) (DevicePtr, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if c.closed.Load() {
		return 0, ErrClosed
	}
	return c.alloc(c.first, n)
}

// alloc checks n, and is counted in the tenant's life lock from the quota
// check to the record, so a Close that races it (a tenant ended by its context while a
// request allocates) waits, then frees what it recorded: nothing is lost.
func (c *tenantCore) alloc(s *Stream, n uint64) (DevicePtr, error) {
	if n == 0 {
		return 0, fmt.Errorf("%w: Alloc of 0 bytes; ask for at least 1", ErrInvalidArgument)
	}
	slot, err := c.enter()
	if err != nil {
		return 0, err
	}
	defer c.life.Exit(slot)
	p, err := c.mem.Alloc((*memStream)(s), n)
	return DevicePtr(p), err
}

// Free is Tenant.Free, for the SDK's own callers.
func (c *tenantCore) Free(p DevicePtr) error {
	return c.free(c.first, p)
}

func (c *tenantCore) free(s *Stream, p DevicePtr) error {
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.Exit(slot)
	return c.mem.Free((*memStream)(s), cuda.DevicePtr(p))
}

// AllocAsync is Tenant.AllocAsync, for the SDK's own callers.
func (c *tenantCore) AllocAsync(s *Stream, n uint64) (DevicePtr, error) {
	if err := c.ownStream(s, "AllocAsync"); err != nil {
		return 0, err
	}
	return c.alloc(s, n)
}

// ownStream refuses a stream that is not one of the tenant's open ones.
func (c *tenantCore) ownStream(s *Stream, op string) error {
	if s == nil || s.t != c {
		return fmt.Errorf("%w: %s needs one of tenant %q's streams", ErrInvalidArgument, op, c.name)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// FreeAsync is Tenant.FreeAsync, for the SDK's own callers.
func (c *tenantCore) FreeAsync(s *Stream, p DevicePtr) error {
	if err := c.ownStream(s, "FreeAsync"); err != nil {
		return err
	}
	return c.free(s, p)
}

// Trim gives the tenant's cached memory back to the driver: its streams'
// free lists, then its pool's cache, after waiting for the streams that
// freed blocks (and the first). It is a no-op without a pool.
func (t *Tenant) Trim() error {
	defer runtime.KeepAlive(t)
	c := t.c
	if c.closed.Load() {
		return ErrClosed
	}
	return c.mem.Trim()
}

// MemGetInfo is what cuMemGetInfo should tell code running as this tenant:
// total is its quota (at most the device's), free what remains of it (at
// most what the device has free). Code that sizes a KV cache from free
// memory then sizes it to the tenant, not the card.
func (t *Tenant) MemGetInfo() (free, total uint64, err error) {
	defer runtime.KeepAlive(t)
	c := t.c
	slot, err := c.enter()
	if err != nil {
		return 0, 0, err
	}
	defer c.life.Exit(slot)
	return c.memOps.MemInfo(c.pool.dev.Primary(), c.cachedBytes)
}

// cachedBytes is the size of the blocks on the tenant's streams' free
// lists (Stats.MemoryCached), without the rest of Stats.
func (c *tenantCore) cachedBytes() (n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.streams {
		n += s.blocks.Bytes()
	}
	return n
}

// CopyToDevice copies src into device memory at dst.
func (t *Tenant) CopyToDevice(dst DevicePtr, src []byte) error {
	defer runtime.KeepAlive(t)
	c := t.c
	return c.memOps.CopyToDevice(cuda.DevicePtr(dst), src)
}

// CopyFromDevice copies device memory at src into dst.
func (t *Tenant) CopyFromDevice(dst []byte, src DevicePtr) error {
	defer runtime.KeepAlive(t)
	c := t.c
	return c.memOps.CopyFromDevice(dst, cuda.DevicePtr(src))
}
