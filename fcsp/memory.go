package fcsp

import (
	"context"
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Alloc allocates n bytes of device memory against the tenant's quota (from
// its pool, in order on its first stream, with WithMemoryPool). The
// quota is checked first, without locks; an over-quota request fails with an
// error that is errors.Is(err, ErrQuotaExceeded) and names requested, used
// and limit; a driver failure after admission (out of memory) gives the
// quota back.
func (c *tenantCore) Alloc(ctx context.Context, n uint64) (DevicePtr, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: Alloc of 0 bytes; ask for at least 1", ErrInvalidArgument)
	}
	return c.alloc(c.first, n)
}

// alloc is counted in the tenant's life lock from the quota check to the
// record, so a Close that races it (a tenant ended by its context while a
// request allocates) waits, then frees what it recorded: nothing is lost.
func (c *tenantCore) alloc(s *Stream, n uint64) (DevicePtr, error) {
	if n == 0 {
		return 0, fmt.Errorf("%w: Alloc of 0 bytes; ask for at least 1", ErrInvalidArgument)
	}
	slot, err := c.enter()
	if err != nil {
		return 0, err
	}
	defer c.life.exit(slot)
	r, err := c.acct.Reserve(n)
	if qe := (*memtrack.QuotaError)(nil); errors.As(err, &qe) && qe.Scope == memtrack.ScopeDevice && c.pool.trimCaches() {
		// Freed blocks kept by pooled tenants count against the device
		// limit: give them back to the driver and try once more.
		r, err = c.acct.Reserve(n)
	}
	if err != nil {
		return 0, err // memtrack's errors name the tenant already (ErrInvalidSize matches ErrInvalidArgument)
	}
	p, err := c.allocFrom(s, n)
	if err != nil {
		r.Cancel()
		return 0, fmt.Errorf("tenant %q: %w", c.name, err)
	}
	if err := r.Commit(uint64(p)); err != nil {
		// Cannot happen for a pointer the driver just returned; the
		// reservation is cancelled, give the memory back too.
		_ = c.freeOn(s, p, n)
		return 0, err
	}
	return DevicePtr(p), nil
}

// Free frees memory the tenant allocated. A pointer it does not own (never
// allocated here, another tenant's, already freed) is refused with
// ErrUnknownPointer and changes nothing.
func (c *tenantCore) Free(p DevicePtr) error {
	return c.free(c.first, p)
}

func (c *tenantCore) free(s *Stream, p DevicePtr) error {
	slot, err := c.enter()
	if err != nil {
		return err
	}
	defer c.life.exit(slot)
	r, err := c.acct.StartRelease(uint64(p))
	if err != nil {
		return err // memtrack's error names the tenant and the pointer
	}
	if class, _, ok := sizeClass(r.Size()); ok && c.mpool != nil {
		// The block may go onto a free list, where it counts against the
		// device limit as cache: settle the release first, or at the limit
		// the block would count twice for a moment and not be cached (the
		// driver's pool would then keep it uncounted).
		n := r.Size()
		r.Commit()
		if c.putCached(s, cuda.DevicePtr(p), class) {
			return nil
		}
		if err := c.freeToDriver(s, cuda.DevicePtr(p)); err != nil {
			// The driver kept it: it is the tenant's again.
			if rr, e := c.acct.Reserve(n); e == nil {
				_ = rr.Commit(uint64(p))
			}
			return fmt.Errorf("tenant %q: %w", c.name, err)
		}
		return nil
	}
	if err := c.freeOn(s, cuda.DevicePtr(p), r.Size()); err != nil {
		// The driver kept it (or a Close, waiting for this call, will free
		// it): it stays recorded, its bytes never stopped counting.
		return errors.Join(fmt.Errorf("tenant %q: %w", c.name, err), r.Cancel())
	}
	r.Commit()
	return nil
}

// MemGetInfo is what cuMemGetInfo should tell code running as this tenant
// (the device's free memory read at most once a millisecond per pool):
// total is its quota (at most the device's), free what remains of it (at
// most what the device has free). Code that sizes a KV cache from free
// memory then sizes it to the tenant, not the card.
func (c *tenantCore) MemGetInfo() (free, total uint64, err error) {
	// The cached figure must not hide a closed tenant or a lost device.
	if c.closed.Load() {
		return 0, 0, ErrClosed
	}
	if lost := c.pool.fault.err(); lost != nil {
		return 0, 0, fmt.Errorf("tenant %q: %w", c.name, lost)
	}
	df, dt, err := c.pool.memInfo(c.do) // at most memInfoMaxAge old
	if err != nil {
		return 0, 0, err
	}
	free, total = c.acct.MemInfo(df, min(dt, c.pool.mem.Limit()))
	// Blocks kept on the tenant's free lists are the tenant's too. (Free
	// space mapped by its pool is not subtracted: only this tenant can
	// allocate it, and the device's free memory already excludes it.)
	free -= min(free, c.cachedBytes())
	return free, total, nil
}

// CopyToDevice copies src into device memory at dst.
func (c *tenantCore) CopyToDevice(dst DevicePtr, src []byte) error {
	return c.do(func(ctx cuda.Context) error { return c.pool.drv.MemcpyHtoD(ctx, cuda.DevicePtr(dst), src) })
}

// CopyFromDevice copies device memory at src into dst.
func (c *tenantCore) CopyFromDevice(dst []byte, src DevicePtr) error {
	return c.do(func(ctx cuda.Context) error { return c.pool.drv.MemcpyDtoH(ctx, dst, cuda.DevicePtr(src)) })
}
