package fcsp

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// memPool is a tenant's stream-ordered pool, with its streams' free lists
// in front of it (blockcache.go).
type memPool struct {
	h       cuda.MemPool
	maxSize uint64 // what the driver lets the pool hold; 0: its default
	keep    uint64 // the most each stream's free lists hold
}

// poolMaxSize is the one place a pool's maximum size is derived from the
// quota, which memtrack owns: the quota itself where one was asked for (the
// driver rounds it up to whole cuda.PoolChunk chunks, so a small quota's
// pool may hold a chunk; the account still bounds what is allocated), else
// 0, the driver's default (the whole device).
func poolMaxSize(quota uint64, explicitQuota bool) uint64 {
	if !explicitQuota {
		return 0
	}
	return quota
}

func (c *tenantCore) openMemPool(quota, keep uint64, explicitQuota, noLists bool) error {
	maxSize := poolMaxSize(quota, explicitQuota)
	if keep == 0 {
		keep = quota
	}
	return c.do(func(ctx cuda.Context) error {
		h, err := c.pool.drv.MemPoolCreate(ctx, c.pool.dev.Ordinal(), maxSize)
		if err != nil {
			return err
		}
		if err := c.pool.drv.MemPoolSetAttribute(ctx, h, cuda.PoolReleaseThreshold, keep); err != nil {
			return errors.Join(err, c.pool.drv.MemPoolDestroy(ctx, h))
		}
		c.mpool = &memPool{h: h, maxSize: maxSize, keep: keep}
		if noLists {
			c.mpool.keep = 0
		}
		return nil
	})
}

// allocFrom allocates n bytes in order on stream s: from s's free list or
// the tenant's pool if it has one, else with cuMemAlloc. When the driver is
// out of memory it gives back the tenant's own cached blocks (a pool of
// mixed sizes fragments up to its maximum size), then the other tenants',
// and tries again after each. The caller is counted in the life lock.
func (c *tenantCore) allocFrom(s *Stream, n uint64) (p cuda.DevicePtr, err error) {
	class, size, cacheable := sizeClass(n)
	if !cacheable || c.mpool == nil {
		size = n
	}
	alloc := func() error {
		if c.mpool == nil {
			// Device memory is not partitioned by SMs: a green context
			// shares its primary context's memory, and the primary context
			// may be current on any thread, so plain allocations skip the
			// partition's lock.
			p, err = c.pool.drv.MemAlloc(c.pool.dev.Primary(), n)
			return err
		}
		if cacheable {
			if q, ok := c.takeCached(s, class); ok {
				p = q
				return nil
			}
		}
		// Stream-ordered: the stream names the context, so where the driver
		// allows it no lock is taken and allocations run in parallel.
		return c.doUnscopedLocked(&c.pool.unscoped.pool, func(ctx cuda.Context) (err error) {
			p, err = c.pool.drv.MemAllocFromPoolAsync(ctx, size, c.mpool.h, s.h())
			return err
		})
	}
	err = alloc()
	if errors.Is(err, cuda.ErrorOutOfMemory) && c.mpool != nil && c.Trim() == nil {
		err = alloc()
	}
	if errors.Is(err, cuda.ErrorOutOfMemory) && c.pool.trimPools(c) > 0 {
		err = alloc()
	}
	if errors.Is(err, cuda.ErrorOutOfMemory) && c.mpool != nil && c.mpool.maxSize > 0 {
		// Where the device still has the memory, the pool's maximum size,
		// the tenant's quota, refused: blocks in use, cached and the gaps
		// between them fill it even though fewer bytes than the quota are
		// allocated. That is the tenant's quota speaking, not the device
		// running out. (What the pool holds cannot decide it: other
		// goroutines free and allocate in between.)
		var devFree uint64
		derr := c.do(func(ctx cuda.Context) (err error) {
			devFree, _, err = c.pool.drv.MemGetInfo(ctx)
			return err
		})
		// With a chunk to spare on the device, the out-of-memory is the
		// pool's maximum size speaking.
		if held, herr := c.poolReserved(); derr == nil && herr == nil && devFree >= size+cuda.PoolChunk {
			return 0, fmt.Errorf("%w: tenant %q asked for %d bytes; its pool holds %d of the %d bytes its %d-byte quota allows it (%d allocated, the rest cached blocks and fragments): %w",
				ErrQuotaExceeded, c.name, n, held, c.mpool.maxSize, c.acct.Limit(), c.acct.Used()-n, err) // Used counts this request's reservation too
		}
	}
	return p, err
}

// freeOn frees the n-byte block p in order on s: onto s's free list when
// there is room, else to the driver. The caller is counted in the life
// lock.
func (c *tenantCore) freeOn(s *Stream, p cuda.DevicePtr, n uint64) error {
	if c.mpool == nil {
		return c.pool.drv.MemFree(c.pool.dev.Primary(), p)
	}
	if class, _, ok := sizeClass(n); ok && c.putCached(s, p, class) {
		return nil
	}
	return c.freeToDriver(s, p)
}

// freeToDriver frees p to the tenant's pool in order on s. The caller is
// counted in the life lock.
func (c *tenantCore) freeToDriver(s *Stream, p cuda.DevicePtr) error {
	return c.doUnscopedLocked(&c.pool.unscoped.pool, func(ctx cuda.Context) error { return c.pool.drv.MemFreeAsync(ctx, p, s.h()) })
}

// AllocAsync allocates n bytes in stream order on s (the memory may be used
// by work queued on s after this call); with WithMemoryPool it comes from
// the tenant's pool. Quota and errors are those of Alloc.
func (c *tenantCore) AllocAsync(s *Stream, n uint64) (DevicePtr, error) {
	if s == nil || s.t != c {
		return 0, fmt.Errorf("%w: AllocAsync needs one of tenant %q's streams", ErrInvalidArgument, c.name)
	}
	if s.closed.Load() {
		return 0, ErrClosed
	}
	return c.alloc(s, n)
}

// FreeAsync frees p in stream order on s: after the work queued on s.
func (c *tenantCore) FreeAsync(s *Stream, p DevicePtr) error {
	if s == nil || s.t != c {
		return fmt.Errorf("%w: FreeAsync needs one of tenant %q's streams", ErrInvalidArgument, c.name)
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return c.free(s, p)
}

// Trim gives the tenant's cached memory back to the driver: its streams'
// free lists, then its pool's cache, after waiting for the streams that
// freed blocks (and the first). It is a no-op without a pool.
func (c *tenantCore) Trim() error {
	if c.closed.Load() {
		return ErrClosed
	}
	if c.mpool == nil {
		return nil
	}
	// In the life lock, so that Close cannot destroy the pool under the
	// trim (the calls below enter it again, which is allowed).
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.exit(slot)
	c.mu.Lock()
	streams := slices.Clone(c.streams)
	c.mu.Unlock()
	var errs []error
	for i, s := range streams {
		n, err := c.flush(s)
		errs = append(errs, err)
		if n > 0 || i == 0 {
			errs = append(errs, s.Synchronize())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.do(func(ctx cuda.Context) error { return c.pool.drv.MemPoolTrimTo(ctx, c.mpool.h, 0) })
}

// flush gives s's free list back to the pool, in order on s, and says how
// many blocks it held.
func (c *tenantCore) flush(s *Stream) (int, error) {
	slot, err := c.enter()
	if err != nil {
		return 0, err
	}
	defer c.life.exit(slot)
	return c.flushLocked(s)
}

// flushLocked is flush for a caller counted in the life lock.
func (c *tenantCore) flushLocked(s *Stream) (int, error) {
	ptrs := s.drain()
	var errs []error
	for _, p := range ptrs {
		errs = append(errs, c.doUnscopedLocked(&c.pool.unscoped.pool, func(ctx cuda.Context) error {
			return c.pool.drv.MemFreeAsync(ctx, p, s.h())
		}))
	}
	return len(ptrs), errors.Join(errs...)
}

// poolReserved is how many bytes the tenant's pool holds from the driver:
// allocated, on the free lists, and cached by the driver.
func (c *tenantCore) poolReserved() (uint64, error) {
	if c.mpool == nil {
		return 0, nil
	}
	var v uint64
	err := c.do(func(ctx cuda.Context) (err error) {
		v, err = c.pool.drv.MemPoolGetAttribute(ctx, c.mpool.h, cuda.PoolReservedMemCurrent)
		return err
	})
	return v, err
}

func (c *tenantCore) closeMemPool(ctx cuda.Context, streams []*Stream) error {
	if c.mpool == nil {
		return nil
	}
	drv := c.pool.drv
	var errs []error
	for _, s := range streams {
		// The tenant is closed and no call is in flight: call the driver
		// with its context directly.
		for _, p := range s.drain() {
			errs = append(errs, drv.MemFreeAsync(ctx, p, s.h()))
		}
		errs = append(errs, drv.StreamSynchronize(ctx, s.h()))
	}
	return errors.Join(append(errs, drv.MemPoolDestroy(ctx, c.mpool.h))...)
}

// trimPools gives every other tenant's cached pool memory back to the
// driver, so that an allocation that found the device full can retry. It
// returns how many pools it trimmed.
func (p *Pool) trimPools(except *tenantCore) int {
	p.mu.Lock()
	var others []*tenantCore
	for _, c := range p.tenants {
		if c != except && c.mpool != nil {
			others = append(others, c)
		}
	}
	p.mu.Unlock()
	n := 0
	for _, c := range others {
		if c.Trim() == nil {
			n++
		}
	}
	return n
}

// trimCaches empties every pooled tenant's free lists (the caller's own
// too), so that an allocation refused by the device limit, which counts
// cached blocks, can retry. It reports whether any bytes were cached.
func (p *Pool) trimCaches() bool {
	p.mu.Lock()
	var pooled []*tenantCore
	for _, c := range p.tenants {
		if c.mpool != nil {
			pooled = append(pooled, c)
		}
	}
	p.mu.Unlock()
	cached := false
	for _, c := range pooled {
		c.mu.Lock()
		for _, s := range c.streams {
			cached = cached || s.cachedBytes() > 0
		}
		c.mu.Unlock()
		_ = c.Trim() // the driver's pool gives back what it kept, too
	}
	return cached
}
