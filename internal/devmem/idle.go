package devmem

import (
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// maxIdlePools is how many emptied pools a device keeps for the next
// tenants. A server that makes a tenant per job (or per request) and closes
// it would otherwise create and destroy a CUDA memory pool each time.
const maxIdlePools = 8

// idlePool is a closed tenant's pool, trimmed to nothing, kept for a new
// tenant that asks for the same maximum size and release threshold (the
// size is fixed when a pool is made).
type idlePool struct {
	h             cuda.MemPool
	maxSize, keep uint64
}

// takeIdle hands out a kept pool made for maxSize and keep.
func (p *Peers) takeIdle(maxSize, keep uint64) (cuda.MemPool, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, ip := range p.idle {
		if ip.maxSize == maxSize && ip.keep == keep {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return ip.h, true
		}
	}
	return 0, false
}

// keepIdle keeps an emptied pool for reuse, unless the device keeps enough
// or closed; false: the caller destroys it.
func (p *Peers) keepIdle(ip idlePool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= maxIdlePools {
		return false
	}
	p.idle = append(p.idle, ip)
	return true
}

// Close destroys the kept pools with ctx; the device's tenants are closed.
// Later closes destroy their pools rather than keep them.
func (p *Peers) Close(drv cuda.Driver, ctx cuda.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	var errs []error
	for _, ip := range idle {
		errs = append(errs, drv.MemPoolDestroy(ctx, ip.h))
	}
	return errors.Join(errs...)
}

// release gives a closed tenant's pool back: trimmed to nothing and kept
// for the next tenant, or destroyed. A pool that still holds memory after
// the trim (some free has not completed) is destroyed.
func (e *pooled) release(drv cuda.Driver, ctx cuda.Context) error {
	if err := drv.MemPoolTrimTo(ctx, e.h, 0); err != nil {
		return errors.Join(err, drv.MemPoolDestroy(ctx, e.h))
	}
	if held, err := drv.MemPoolGetAttribute(ctx, e.h, cuda.PoolReservedMemCurrent); err != nil || held != 0 ||
		!e.cfg.Peers.keepIdle(idlePool{h: e.h, maxSize: e.maxSize, keep: e.keep}) {
		return errors.Join(err, drv.MemPoolDestroy(ctx, e.h))
	}
	return nil
}
