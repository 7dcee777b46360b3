package devmem

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// The device limit and a pool's chunks. The driver maps a pool's memory a
// chunk at a time (cuda.PoolChunk: 32 MiB on the H200) as blocks reach
// it, and keeps it mapped after the blocks are freed, until a trim or a
// synchronisation above the release threshold: a tenant that allocated
// 1 MiB holds 32 MiB of the device (sixteen such tenants under a 256 MiB
// limit held 512 MiB). So the device limit counts what the pool maps, as
// the driver reports it (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not what
// is allocated from it, which the tenant's quota counts.
//
// Which chunks an allocation maps the driver says only after it, so
// before it the most it may map is charged (growth), and after it the
// charge comes down to what the pool maps (settleAfter). Where the limit
// has no room for that, even after every pool's cache was given back, the
// allocation is tried alone (exactly): one at a time on the device, with
// none of its pool's in flight, since it may well fit in chunks already
// mapped; if it mapped past the limit it is given back, with the chunk,
// before the caller hears of the refusal. Only then does the driver hold
// more than the limit, by that allocation's new chunks, for that moment.

// charge is a pool's charge against the device limit, under mu: held
// bytes of it, pending of which the allocations in flight may map; mapped
// is what the pool mapped at the last reading; exact says an allocation
// the limit had no room for is being tried alone.
type charge struct {
	mu                    lockorder.Mutex[lockorder.Charge]
	held, pending, mapped uint64 // guarded by mu
	exact                 bool   // guarded by mu
}

// charge is the pool's charge, made on first use.
func (e *pooled) charge() *charge { return loadOrNew(&e.c) }

func (e *pooled) Charged() uint64 {
	c := e.c.Load()
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// growth is the most a size-byte allocation from the pool may map: the
// chunks it spans, and one more where it straddles a chunk's end; nothing
// once the charge covers the pool's maximum size, which it never maps
// past. The caller holds c.mu.
func (e *pooled) growth(c *charge, size uint64) uint64 {
	w := ((size+cuda.PoolChunk-1)/cuda.PoolChunk + 1) * cuda.PoolChunk
	if e.maxSize > 0 {
		most := (e.maxSize + cuda.PoolChunk - 1) / cuda.PoolChunk * cuda.PoolChunk
		w = min(w, most-min(most, c.held))
	}
	return w
}

// errAlone says an allocation is being tried alone: this one waits its
// turn rather than charge ahead of it.
var errAlone = errors.New("an allocation of the pool is being tried alone")

// precharge charges the device limit for what an allocation of size bytes
// may map, before the driver is asked; it returns the bytes charged, which
// settleAfter takes. The limit's refusal is its *memtrack.QuotaError.
func (e *pooled) precharge(size uint64) (uint64, error) {
	c := e.charge()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exact {
		return 0, errAlone
	}
	w := e.growth(c, size)
	if w > 0 {
		if err := e.cfg.Tracker.ReserveDevice(w); err != nil {
			return 0, err
		}
		c.held += w
	}
	c.pending += w
	return w, nil
}

// fromPool allocates a size-byte block for an n-byte request from the
// driver's pool in order on s, with the device limit charged for what it
// maps. The caller is counted in the life lock.
func (e *pooled) fromPool(s Stream, n, size uint64) (cuda.DevicePtr, error) {
	if !e.used.Load() {
		e.used.Store(true)
	}
	w, err := e.precharge(size)
	if err != nil && deviceFull(err) {
		err = e.cfg.Peers.atLimit(e, func() (err error) {
			w, err = e.precharge(size)
			return err
		})
	}
	if errors.Is(err, errAlone) || err != nil && deviceFull(err) {
		return e.exactly(s, n, size)
	}
	if err != nil {
		return 0, err
	}
	p, err := e.poolAlloc(s, size)
	if serr := e.settleAfter(w); serr != nil {
		if err == nil {
			err = errors.Join(e.refusal(n, serr), e.giveBack(s, p))
		}
		return 0, err
	}
	return p, err
}

// poolAlloc is the driver's allocation from the pool, in order on s.
func (e *pooled) poolAlloc(s Stream, size uint64) (p cuda.DevicePtr, err error) {
	err = e.cfg.ordered(func(ctx cuda.Context) (err error) {
		p, err = e.cfg.Driver.MemAllocFromPoolAsync(ctx, size, e.h, s.Handle())
		return err
	})
	return p, err
}

// settleAfter ends an allocation that precharge charged w bytes for: the
// charge comes down to what the pool maps, and what the allocations still
// in flight may map. A pool that mapped more than was charged (which the
// driver's first-fit never does) is charged the rest, or refused.
func (e *pooled) settleAfter(w uint64) error {
	c := e.charge()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending -= w
	mapped, err := e.reserved(e.cfg.Device.Primary())
	if err != nil {
		return err
	}
	return e.settleLocked(c, mapped, true)
}

// settleLocked brings the charge to mapped (what the pool maps now) plus
// what the allocations in flight may map: down where the pool gave memory
// back; up, where grow allows it, where the pool maps more than is
// charged, which the device limit may refuse (its *memtrack.QuotaError,
// the charge as it was). (mapped may count chunks the allocations in
// flight mapped already: the charge stays above what is mapped.) The
// caller holds c.mu.
func (e *pooled) settleLocked(c *charge, mapped uint64, grow bool) error {
	if mapped != c.mapped {
		c.mapped = mapped
		e.cfg.Info.Changed() // the device's free memory changed
	}
	want := mapped + c.pending
	switch {
	case want < c.held:
		e.cfg.Tracker.ReleaseDevice(c.held - want)
		e.cfg.Peers.gaveBack()
	case mapped > c.held && grow:
		if err := e.cfg.Tracker.ReserveDevice(want - c.held); err != nil {
			return err
		}
	default:
		return nil
	}
	c.held = want
	return nil
}

// exactly allocates alone what the device limit had no room to charge
// ahead: one such allocation at a time on the device, with none of its
// pool's in flight, so that what the pool maps after it is its own doing.
// What it mapped is charged; where the limit has no room for it, the block
// is given back with its chunk and the allocation refused.
func (e *pooled) exactly(s Stream, n, size uint64) (cuda.DevicePtr, error) {
	e.cfg.Peers.alone.Lock()
	defer e.cfg.Peers.alone.Unlock()
	c := e.charge()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exact = true
	defer func() { c.exact = false }()
	for c.pending > 0 { // the pool's allocations in flight end in microseconds
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
	}
	ctx := e.cfg.Device.Primary()
	mapped, err := e.reserved(ctx)
	if err == nil {
		err = e.settleLocked(c, mapped, false)
	}
	var inUse uint64
	if err == nil {
		inUse, err = e.cfg.Driver.MemPoolGetAttribute(ctx, e.h, cuda.PoolUsedMemCurrent)
	}
	if err != nil {
		return 0, err
	}
	if mapped-min(mapped, inUse) < size {
		// No room in what the pool maps: the allocation would map a
		// chunk, which the limit has no room for (it refused it above,
		// after every cache was given back).
		t := e.cfg.Tracker
		if room := t.Room(cuda.PoolChunk); room < cuda.PoolChunk {
			return 0, e.refusal(n, &memtrack.QuotaError{Requested: cuda.PoolChunk, Used: t.Limit() - room, Limit: t.Limit(), Scope: memtrack.ScopeDevice})
		}
	}
	p, err := e.poolAlloc(s, size)
	if err != nil {
		return 0, err
	}
	if mapped, err = e.reserved(ctx); err == nil {
		if err = e.settleLocked(c, mapped, true); err == nil {
			return p, nil
		}
	}
	return 0, errors.Join(e.refusal(n, err), e.giveBackLocked(c, s, p))
}

// refusal is the error of an n-byte allocation whose chunks the device
// limit refused (err), its QuotaError.Tenant set (the text leaves the
// tenant to the face).
func (e *pooled) refusal(n uint64, err error) error {
	var qe *memtrack.QuotaError
	if !errors.As(err, &qe) {
		return err
	}
	q := *qe
	q.Tenant = e.cfg.tenant()
	return fmt.Errorf("a %d-byte allocation needs its pool to map up to %d more bytes of device memory, which it maps in chunks of %d: %w", n, q.Requested, uint64(cuda.PoolChunk), &q)
}

// giveBack frees p, which the device limit has no room for, and trims the
// pool to its charge, so that a chunk p mapped goes back to the driver.
// Where the driver keeps it (its free has not completed on s), s is waited
// for, unless it captures. The caller is counted in the life lock.
func (e *pooled) giveBack(s Stream, p cuda.DevicePtr) error {
	c := e.charge()
	c.mu.Lock()
	defer c.mu.Unlock()
	return e.giveBackLocked(c, s, p)
}

func (e *pooled) giveBackLocked(c *charge, s Stream, p cuda.DevicePtr) error {
	ferr := e.freeToDriver(s, p)
	ctx := e.cfg.Device.Primary()
	keep := c.held - min(c.held, c.pending)
	mapped, err := e.trimTo(ctx, keep)
	if err == nil && mapped > keep && !s.Capturing() {
		// The driver keeps the chunk until it has seen the free: s is
		// the caller's own stream.
		if err = e.seen(s, true); err == nil {
			mapped, err = e.trimTo(ctx, keep)
		}
	}
	if err == nil {
		err = e.settleLocked(c, mapped, false)
	}
	return errors.Join(ferr, err)
}

// trimPool gives what the pool caches to the driver and the charge for it
// to the device limit, and says how many bytes that was. The caller is
// counted in the life lock.
func (e *pooled) trimPool() (uint64, error) {
	c := e.charge()
	c.mu.Lock()
	defer c.mu.Unlock()
	mapped, err := e.trimTo(e.cfg.Device.Primary(), 0)
	if err != nil {
		return 0, err
	}
	before := c.held
	err = e.settleLocked(c, mapped, false)
	return before - c.held, err
}

// trimTo trims the pool to keep bytes and says what it maps then.
func (e *pooled) trimTo(ctx cuda.Context, keep uint64) (uint64, error) {
	if err := e.cfg.Driver.MemPoolTrimTo(ctx, e.h, keep); err != nil {
		return 0, err
	}
	return e.reserved(ctx)
}

// reserved is what the pool maps (the driver's reserved memory), read with
// ctx by a caller counted in the life lock.
func (e *pooled) reserved(ctx cuda.Context) (uint64, error) {
	return e.cfg.Driver.MemPoolGetAttribute(ctx, e.h, cuda.PoolReservedMemCurrent)
}
