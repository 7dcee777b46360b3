package devmem

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// pooled allocates in stream order from a pool of the tenant's own, through
// its streams' free lists (blocks.go).
type pooled struct {
	cfg     Config
	h       cuda.MemPool
	maxSize uint64 // what the driver lets the pool hold; 0: its default
	keep    uint64 // the pool's release threshold, and the most each stream's free lists hold unless noLists
	// c is the pool's charge against the device limit (charge.go), made
	// when the pool is first used: a tenant that never allocates makes none.
	c atomic.Pointer[charge]
	// used: the pool has handed out memory. One that never did holds none
	// and had nothing queued: Close keeps or destroys it without waiting
	// for the streams or trimming it (a server makes and closes tenants
	// that never allocate through their pool).
	used    atomic.Bool
	noLists bool // the driver's pool alone (PoolConfig.NoLists)
}

// PoolConfig is how a pooled engine's pool is made.
type PoolConfig struct {
	// Quota is the tenant's quota, at most the device's limit; Explicit
	// says it was asked for (else it is the device's limit).
	Quota    uint64
	Explicit bool
	// Keep is how much the driver's pool keeps across a synchronisation
	// and the most each stream's free lists hold; 0: the quota.
	Keep uint64
	// NoLists: the driver's pool alone, without free lists (benchmarks).
	NoLists bool
	// Plain: no pool, cuMemAlloc and cuMemFree (fcsp's WithoutMemoryPool;
	// Open makes a plain engine).
	Plain bool
	// Green: the tenant's streams are a partition's, so Config.Probe
	// applies (Open drops it otherwise).
	Green bool
}

// Open makes the tenant's engine as pool says: plain, or pooled with a
// pool of at most the quota and never more than the device may hold (a
// quota of MaxUint64 overflowed the driver's rounding of the size to
// whole chunks).
func Open(cfg Config, pool PoolConfig) (Allocator, error) {
	if !pool.Green {
		cfg.Probe = nil
	}
	cfg.noQuota = !pool.Explicit
	if pool.Plain {
		return NewPlain(cfg), nil
	}
	pool.Quota = min(pool.Quota, cfg.Tracker.Limit())
	return NewPooled(cfg, pool)
}

// MaxSize is the one place a pool's maximum size is derived from the
// quota, which memtrack owns: the quota itself where one was asked for (the
// driver rounds it up to whole cuda.PoolChunk chunks, so a small quota's
// pool may hold a chunk; the account still bounds what is allocated), else
// 0, the driver's default (the whole device).
func (p PoolConfig) MaxSize() uint64 {
	if !p.Explicit {
		return 0
	}
	return p.Quota
}

// NewPooled makes the tenant's pool and its engine, which joins cfg.Peers
// until Close.
func NewPooled(cfg Config, pool PoolConfig) (Allocator, error) {
	if err := cfg.Account.ChargeDeviceApart(); err != nil { // the engine charges what the pool maps
		return nil, err
	}
	cfg.chunked = true
	e := &pooled{cfg: cfg, maxSize: pool.MaxSize(), keep: pool.Keep, noLists: pool.NoLists}
	if e.keep == 0 {
		e.keep = pool.Quota
	}
	if h, ok := cfg.Peers.takeIdle(e.maxSize, e.keep); ok {
		e.h = h // an earlier tenant's, emptied: no driver call
		cfg.Peers.add(e)
		return e, nil
	}
	err := cfg.do(func(ctx cuda.Context) error {
		h, err := cfg.Driver.MemPoolCreate(ctx, cfg.Device.Ordinal(), e.maxSize)
		if err != nil {
			return err
		}
		if err := cfg.Driver.MemPoolSetAttribute(ctx, h, cuda.PoolReleaseThreshold, e.keep); err != nil {
			return errors.Join(err, cfg.Driver.MemPoolDestroy(ctx, h))
		}
		e.h = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	cfg.Peers.add(e)
	return e, nil
}

func (e *pooled) Alloc(s Stream, n uint64) (cuda.DevicePtr, error) {
	r, err := e.cfg.reserve(n) // the quota: the device limit counts what the pool maps (charge)
	if err != nil {
		return 0, err
	}
	p, err := e.alloc(s, n)
	if err != nil {
		r.Cancel()
		return 0, err
	}
	if err := r.Commit(uint64(p)); err != nil {
		// Cannot happen for a pointer the driver just returned; the
		// reservation is cancelled, give the memory back too.
		_ = e.freeOn(s, p, n)
		return 0, err
	}
	return p, nil
}

// alloc allocates n bytes in order on s: from s's free list, else from the
// pool. When the driver is out of memory it gives back the tenant's own
// cached blocks (a pool of mixed sizes fragments up to its maximum size),
// then the other tenants', and tries again after each. The caller is
// counted in the life lock: nothing here counts itself in again.
func (e *pooled) alloc(s Stream, n uint64) (p cuda.DevicePtr, err error) {
	class, size, cacheable := sizeClass(n)
	alloc := func() error {
		if cacheable {
			if q, ok := e.takeCached(s, class); ok {
				p = q
				return nil
			}
		}
		p, err = e.fromPool(s, n, size)
		return err
	}
	err = alloc()
	if errors.Is(err, cuda.ErrorOutOfMemory) {
		if _, terr := e.trim(false); terr == nil {
			err = alloc()
		}
	}
	if errors.Is(err, cuda.ErrorOutOfMemory) && e.cfg.Peers.trimOthers(e) > 0 {
		err = alloc()
	}
	if errors.Is(err, cuda.ErrorOutOfMemory) && e.maxSize > 0 {
		// Where the device still has the memory, the pool's maximum size,
		// the tenant's quota, refused: blocks in use, cached and the gaps
		// between them fill it even though fewer bytes than the quota are
		// allocated. That is the tenant's quota speaking, not the device
		// running out. (What the pool holds cannot decide it: other
		// goroutines free and allocate in between.)
		ctx := e.cfg.Device.Primary()
		devFree, _, derr := e.cfg.Driver.MemGetInfo(ctx)
		// With a chunk to spare on the device, the out-of-memory is the
		// pool's maximum size speaking.
		if held, herr := e.reserved(ctx); derr == nil && herr == nil && devFree >= size+cuda.PoolChunk {
			a := e.cfg.Account
			return 0, fmt.Errorf("%w: asked for %d bytes; its pool holds %d of the %d bytes its %d-byte quota allows it (%d allocated, the rest cached blocks and fragments): %w",
				memtrack.ErrQuotaExceeded, n, held, e.maxSize, a.Limit(), a.Used()-n, err) // Used counts this request's reservation too
		}
	}
	return p, err
}

func (e *pooled) Free(s Stream, p cuda.DevicePtr) error {
	r, err := e.cfg.Account.StartRelease(uint64(p))
	if err != nil {
		return err // memtrack's error names the pointer
	}
	if class, _, ok := sizeClass(r.Size()); ok {
		if l, counted := e.cacheRoom(s, class); counted != nil {
			// On the list the block is the engine's cache, no longer the
			// tenant's allocation: the release settles before the block
			// can be taken, so that an allocation on s that takes it at
			// once never finds its bytes counted twice against the quota.
			r.Commit()
			l.push(counted, class, p)
			return nil
		}
	}
	if err := e.freeToDriver(s, p); err != nil {
		// The driver kept it (or a Close, waiting for this call, will
		// free it): it stays recorded, its bytes never stopped counting,
		// as a plain engine's. (Settling first and recording it again
		// after a refusal lost the record where the quota had filled
		// meanwhile.)
		return errors.Join(err, r.Cancel())
	}
	r.Commit()
	return nil
}

// freeOn frees the n-byte block p in order on s: onto s's free list when
// there is room, else to the driver.
func (e *pooled) freeOn(s Stream, p cuda.DevicePtr, n uint64) error {
	if class, _, ok := sizeClass(n); ok && e.putCached(s, p, class) {
		return nil
	}
	return e.freeToDriver(s, p)
}

// freeToDriver frees p to the pool in order on s.
func (e *pooled) freeToDriver(s Stream, p cuda.DevicePtr) error {
	err := e.cfg.ordered(func(ctx cuda.Context) error { return e.cfg.Driver.MemFreeAsync(ctx, p, s.Handle()) })
	if b := s.Blocks(); err == nil && !b.freed.Load() {
		b.freed.Store(true)
	}
	return err
}

// seen synchronises s, whose freed blocks' chunks the driver gives back
// only then: waiting for its work where wait says so, else only where
// its work is done already (a neighbour's trim waits for no stream).
func (e *pooled) seen(s Stream, wait bool) error {
	b := s.Blocks()
	if !b.freed.Load() || !wait && !s.Idle() {
		return nil
	}
	b.freed.Store(false) // before: a free after the synchronisation sets it again
	err := s.Synchronize()
	if err != nil {
		b.freed.Store(true)
	}
	return err
}

// takeCached pops a cached block of the class from s's list.
func (e *pooled) takeCached(s Stream, class int) (cuda.DevicePtr, bool) {
	l := s.Blocks().l.Load()
	if l == nil {
		return 0, false
	}
	return l.take(class)
}

// putCached keeps a freed block on s's list if it has room (keep bytes per
// stream); false means the caller frees it to the driver.
func (e *pooled) putCached(s Stream, p cuda.DevicePtr, class int) bool {
	l, counted := e.cacheRoom(s, class)
	if counted == nil {
		return false
	}
	l.push(counted, class, p)
	return true
}

// cacheRoom counts a block of the class in on s's list where it has room
// (keep bytes per stream; the pool's maximum size already bounds live and
// cached blocks together); the caller pushes the block there (nil: it
// frees the block to the driver). A cached block is still device memory,
// in a chunk of the pool the device limit counts (charge). While a request
// the device limit refused is trimming the caches, a freed block goes back
// to the driver, so that its chunk can go back too.
func (e *pooled) cacheRoom(s Stream, class int) (*freeList, *shard) {
	if e.noLists || e.cfg.Peers.underPressure() {
		return nil, nil
	}
	l := s.Blocks().list()
	return l, l.room(class, e.keep)
}

// drain empties s's list and returns its blocks: the caller gives them to
// the driver.
func (e *pooled) drain(s Stream) []cuda.DevicePtr {
	l := s.Blocks().l.Load()
	if l == nil {
		return nil
	}
	ptrs, _ := l.drain()
	return ptrs
}

func (e *pooled) Flush(s Stream) error {
	_, err := e.flushLocked(s)
	return err
}

// flushLocked gives s's free list back to the pool, in order on s, and
// says how many blocks it held.
func (e *pooled) flushLocked(s Stream) (int, error) {
	ptrs := e.drain(s)
	var errs []error
	for _, p := range ptrs {
		errs = append(errs, e.freeToDriver(s, p))
	}
	return len(ptrs), errors.Join(errs...)
}

func (e *pooled) Trim() error {
	// In the life lock, once, so that Close cannot destroy the pool under
	// the trim and a Reshape's pause waits for it whole.
	tok, err := e.cfg.Enter()
	if err != nil {
		return err
	}
	defer e.cfg.Exit(tok)
	_, err = e.trim(true)
	return err
}

// trim gives the streams' lists back to the pool, then what the pool
// caches to the driver, and says how many bytes of the device limit that
// freed. The streams on which blocks were freed are synchronised first,
// so that the driver may give their chunks back: with wait, waiting for
// their work; without (a neighbour's request), only those whose work is
// done, so that an allocation at the limit waits for no tenant's stream.
// A capturing stream is left alone: a free on it would join the graph, a
// synchronisation would end the capture. The caller is counted in the
// life lock.
func (e *pooled) trim(wait bool) (uint64, error) {
	var errs []error
	streams := e.cfg.Streams()
	defer e.cfg.ReleaseStreams(streams)
	for _, s := range streams {
		if s.Capturing() {
			continue
		}
		_, err := e.flushLocked(s)
		errs = append(errs, err, e.seen(s, wait))
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return e.trimPool()
}

// trimForPeer is trim for another tenant's request the device or its
// limit refused: without waiting for any stream, and not at all while
// this tenant is paused by a Reshape, closing, or was never used.
func (e *pooled) trimForPeer() uint64 {
	if !e.used.Load() {
		return 0
	}
	tok, ok := e.cfg.TryEnter()
	if !ok {
		return 0
	}
	defer e.cfg.Exit(tok)
	released, _ := e.trim(false)
	return released
}

func (e *pooled) Reserved() (uint64, error) {
	var v uint64
	err := e.cfg.do(func(ctx cuda.Context) (err error) {
		v, err = e.reserved(ctx)
		return err
	})
	return v, err
}

func (e *pooled) Ops() *Config { return &e.cfg }

func (e *pooled) Close(ctx cuda.Context, leaks []memtrack.Allocation) error {
	e.cfg.Peers.remove(e)
	drv := e.cfg.Driver
	if !e.used.Load() && len(leaks) == 0 {
		if e.cfg.Peers.keepIdle(idlePool{h: e.h, maxSize: e.maxSize, keep: e.keep}) {
			return nil
		}
		return drv.MemPoolDestroy(ctx, e.h)
	}
	var errs []error
	streams := e.cfg.Streams()
	defer e.cfg.ReleaseStreams(streams)
	// Leaks first: their frees are ordered on the first stream.
	for _, a := range leaks {
		errs = append(errs, drv.MemFreeAsync(ctx, cuda.DevicePtr(a.Ptr), streams[0].Handle()))
	}
	for _, s := range streams {
		// No call is in flight: call the driver with ctx directly.
		for _, p := range e.drain(s) {
			errs = append(errs, drv.MemFreeAsync(ctx, p, s.Handle()))
		}
		errs = append(errs, drv.StreamSynchronize(ctx, s.Handle()))
	}
	if err := errors.Join(errs...); err != nil {
		err = errors.Join(err, drv.MemPoolDestroy(ctx, e.h))
		e.uncharge()
		return err
	}
	err := e.release(drv, ctx)
	e.uncharge()
	return err
}

// uncharge gives the pool's charge back to the device limit: it was
// emptied and kept, or destroyed.
func (e *pooled) uncharge() {
	c := e.c.Load()
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 {
		e.cfg.Tracker.ReleaseDevice(c.held)
	}
	if c.mapped > 0 {
		e.cfg.Info.Changed()
	}
	c.held, c.pending, c.mapped = 0, 0, 0
}
