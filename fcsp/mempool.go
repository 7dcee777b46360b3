package fcsp

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// memPool is a tenant's stream-ordered pool.
type memPool struct {
	h       cuda.MemPool
	quota   uint64
	maxSize uint64 // what the driver lets the pool hold; 0: its default
}

func (c *tenantCore) openMemPool(quota, keep uint64, explicitQuota bool) error {
	maxSize := uint64(0) // the driver's default when no quota was asked for
	if explicitQuota {
		maxSize = quota
	}
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
		c.mpool = &memPool{h: h, quota: quota, maxSize: maxSize}
		return nil
	})
}

// allocFrom allocates n bytes on stream s, from the tenant's pool if it has
// one. When the driver is out of memory it gives back the tenant's own
// cached blocks (a pool of mixed sizes fragments up to its maximum size),
// then the other tenants', and tries again after each.
func (c *tenantCore) allocFrom(s cuda.Stream, n uint64) (p DevicePtr, err error) {
	alloc := func() error {
		if c.mpool == nil {
			// Device memory is not partitioned by SMs: a green context
			// shares its primary context's memory, and the primary context
			// may be current on any thread, so plain allocations skip the
			// partition's lock.
			return c.onPrimary(func(ctx cuda.Context) (err error) {
				p, err = c.pool.drv.MemAlloc(ctx, n)
				return err
			})
		}
		// Stream-ordered: the stream names the context, so where the driver
		// allows it no lock is taken and allocations run in parallel.
		return c.doUnscoped(&c.pool.unscoped.pool, func(ctx cuda.Context) (err error) {
			p, err = c.pool.drv.MemAllocFromPoolAsync(ctx, n, c.mpool.h, s)
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
		// The pool is at its maximum size, the tenant's quota: blocks in
		// use and the gaps between them fill it even though fewer bytes
		// than the quota are allocated. That is the tenant's quota speaking,
		// not the device running out.
		if held, herr := c.poolReserved(); herr == nil && held+n > c.mpool.maxSize {
			return 0, fmt.Errorf("%w: tenant %q asked for %d bytes; its pool holds %d of its %d-byte quota (%d allocated, the rest fragments): %w",
				ErrQuotaExceeded, c.name, n, held, c.mpool.maxSize, c.acct.Used()-n, err) // Used counts this request's reservation too
		}
	}
	return p, err
}

func (c *tenantCore) freeOn(s cuda.Stream, p DevicePtr) error {
	if c.mpool == nil {
		return c.onPrimary(func(ctx cuda.Context) error { return c.pool.drv.MemFree(ctx, p) })
	}
	return c.doUnscoped(&c.pool.unscoped.pool, func(ctx cuda.Context) error { return c.pool.drv.MemFreeAsync(ctx, p, s) })
}

// AllocAsync allocates n bytes in stream order on s (the memory may be used
// by work queued on s after this call); with WithMemoryPool it comes from
// the tenant's pool. Quota and errors are those of Alloc.
func (c *tenantCore) AllocAsync(s *Stream, n uint64) (DevicePtr, error) {
	if s == nil || s.t != c {
		return 0, fmt.Errorf("%w: AllocAsync needs one of tenant %q's streams", ErrInvalidArgument, c.name)
	}
	return c.alloc(s.h, n)
}

// FreeAsync frees p in stream order on s: after the work queued on s.
func (c *tenantCore) FreeAsync(s *Stream, p DevicePtr) error {
	if s == nil || s.t != c {
		return fmt.Errorf("%w: FreeAsync needs one of tenant %q's streams", ErrInvalidArgument, c.name)
	}
	return c.free(s.h, p)
}

// Trim gives the tenant pool's cached memory back to the driver, after
// waiting for the tenant's first stream. It is a no-op without a pool.
func (c *tenantCore) Trim() error {
	if c.mpool == nil {
		return nil
	}
	s := c.Stream()
	if err := s.Synchronize(); err != nil {
		return err
	}
	return c.do(func(ctx cuda.Context) error { return c.pool.drv.MemPoolTrimTo(ctx, c.mpool.h, 0) })
}

// cached is how many bytes the tenant's pool holds from the driver beyond
// what is allocated.
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

func (c *tenantCore) closeMemPool(ctx cuda.Context) error {
	if c.mpool == nil {
		return nil
	}
	drv := c.pool.drv
	first := c.streams0()
	return errors.Join(drv.StreamSynchronize(ctx, first), drv.MemPoolDestroy(ctx, c.mpool.h))
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
