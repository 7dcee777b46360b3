// Package devmem is a tenant's device memory engine: allocations counted
// against the tenant's quota, made either with plain cuMemAlloc/cuMemFree
// (NewPlain) or in stream order from a pool of the tenant's own, with
// per-stream free lists in front of it (NewPooled). The tenant chooses
// once, when it is made, and holds the Allocator; it knows nothing of
// either.
//
// The engine sees a stream only as a Stream: its handle and the Blocks the
// stream keeps for it. It never imports the public face (package fcsp);
// what it needs of the tenant (its life lock, its streams) comes in
// Config.
//
// # Locks
//
// Their places in docs/LOCKS.md's order:
//
//	Peers.mu (11: the pooled engines, the idle pools kept)
//	└── Peers.alone (12: one allocation at a time tried alone against the device limit)
//	    └── charge.mu (13: a pool's charge; pool attribute reads and trims under it)
//	        └── InfoCache.mu (14: one refresh of the device's figures; Get only tries it)
//	bins (TryLock first, then waited for: outside the ranks)
package devmem

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/unscoped"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Allocator is a tenant's device memory. Alloc, Free and Flush are called
// by a caller counted in the tenant's life lock (Config.Enter), so that the
// tenant's Close waits for them; Trim and Reserved count themselves in.
// Neither counts itself in again while counted: a Reshape's pause between
// two entries would wait for the first while the second waited at its
// gate. Close is called once no call is in flight, and the last.
//
// The device limit (Config.Tracker) counts what the engines hold from the
// driver: a plain engine's allocations, and the memory a pooled engine's
// pool maps, in whole chunks (cuda.PoolChunk on the H200), which holds its
// allocations, its cached blocks and the pool's free space. The tenant's
// quota (Config.Account) counts what was asked for.
type Allocator interface {
	// Alloc allocates n bytes (n > 0), in order on s where the engine
	// orders allocations, after reserving them in the tenant's account.
	// Over the quota, or where the device limit has no room for what it
	// must map, it fails with an error that matches
	// memtrack.ErrQuotaExceeded (a *memtrack.QuotaError in its chain); a
	// driver failure gives the reservation back.
	Alloc(s Stream, n uint64) (cuda.DevicePtr, error)
	// Free frees p, allocated by Alloc, in order on s. A pointer the
	// account does not hold is refused with its error, changing nothing.
	Free(s Stream, p cuda.DevicePtr) error
	// Flush gives the blocks kept for s back to the driver, in order on s:
	// the stream is closing.
	Flush(s Stream) error
	// Trim gives what the tenant caches back to the driver (its streams'
	// lists, then its pool's cache), waiting for the streams that freed
	// blocks and the first, except a capturing one (a synchronisation
	// would end its capture). A plain engine caches nothing.
	Trim() error
	// Reserved is how many bytes the tenant's pool holds from the driver:
	// allocated, cached on the lists and by the driver (0 without one).
	Reserved() (uint64, error)
	// Charged is what the engine holds of the device limit: a plain
	// engine's allocations, or what a pooled engine's pool maps (with
	// what the allocations in flight may map). No driver call.
	Charged() uint64
	// Close frees the allocations the tenant leaked and every cached block,
	// with ctx (the tenant is closed and no call is in flight), and
	// destroys the pool. It asks the Owner for its streams only where it
	// must wait for them (a pool that was used): a list made for every
	// tenant closed was garbage.
	Close(ctx cuda.Context, leaks []memtrack.Allocation) error
	// Ops is the engine's Config, whose fills, copies and MemInfo the
	// tenant calls directly (they allocate nothing): the tenant keeps a
	// pointer to it, not a copy of its own.
	Ops() *Config
}

// Stream is one of the tenant's streams, as the engine sees it.
type Stream interface {
	// Handle is the stream's CUstream now. A reshape may change it between
	// calls, never during one (it waits for the calls in the life lock).
	Handle() cuda.Stream
	// Blocks is what the stream keeps for the engine.
	Blocks() *Blocks
	// Synchronize waits for the work queued on the stream, as the tenant
	// does (Trim waits so before it trims the pool), for a caller counted
	// in the life lock: it does not count itself in again.
	Synchronize() error
	// Capturing says a capture is under way on the stream: it is not
	// synchronised, and no block is freed on it, which would join the
	// graph rather than the pool.
	Capturing() bool
	// Idle says the stream's work is done (cuStreamQuery), without
	// waiting: false while it runs, captures, or on an error.
	Idle() bool
}

// Owner is what the engine needs of its tenant.
type Owner interface {
	// Enter counts a call in the tenant's life lock, or fails (closed, or
	// the device lost); Exit counts it out with Enter's token.
	Enter() (token uint32, err error)
	Exit(token uint32)
	// TryEnter is Enter for a neighbour's trim, which must not wait at
	// the tenant's Reshape gate (two tenants trimming each other while
	// both reshape would wait for each other): false while the tenant is
	// paused, closing, or its device lost.
	TryEnter() (token uint32, ok bool)
	// Streams lists the tenant's open streams, its first stream first,
	// each kept from reuse (a closed stream's memory serves a later one)
	// until ReleaseStreams is given the list.
	Streams() []Stream
	ReleaseStreams([]Stream)
	// Log hears a once-only notice.
	Log(msg string)
}

// Device is the device the engine allocates on.
type Device interface {
	Ordinal() cuda.Device
	// Primary is the device's primary context, which serves every memory
	// call of the device, green streams' included (docs/CONTEXTS.md), and
	// may be current on any number of threads. A reset may replace it.
	Primary() cuda.Context
}

// Config is what an engine needs of its tenant and device.
type Config struct {
	Driver cuda.Driver // the guarded driver: a fault is seen as on any call
	Device Device
	// Account is the tenant's quota; Tracker the device's limit, against
	// which the blocks kept on free lists count too (they are not the
	// tenant's, but the device's memory all the same).
	Account *memtrack.Account
	Tracker *memtrack.Tracker
	// Peers are the device's engines, which give back what they cache when
	// an allocation finds the device full. One per device.
	Peers *Peers
	// Info caches the device's memory figures for MemInfo; the engines
	// tell it when they change what they hold. One per device.
	Info *InfoCache
	// Owner is the tenant: one interface it implements rather than a func
	// per need, each of which was an allocation per tenant made.
	Owner
	// Probe, set where the tenant's streams are a partition's (green
	// contexts), is the device's answer to whether the driver takes
	// stream-ordered pool calls with no context current
	// (internal/unscoped); those calls then go so where it does, and in
	// the primary context otherwise, as they always do without Probe. The
	// Owner's Log hears when the driver refuses. (Fields derived rather
	// than kept: the Config is copied into every tenant's engine.)
	Probe *unscoped.Probe
	// noQuota: the tenant asked for no quota (PoolConfig.Explicit), so its
	// account's limit is the device's; Open sets it.
	noQuota bool
	// chunked: the engine's pool maps device memory in whole chunks
	// (NewPooled sets it), which MemInfo's free rounds down to.
	chunked bool
}

// tenant is the tenant's name, for errors: its account's.
func (c *Config) tenant() string { return c.Account.Name() }

// do runs f with the primary context, counted in the tenant's life lock,
// for a caller that is not counted in already.
func (c *Config) do(f func(ctx cuda.Context) error) error {
	tok, err := c.Enter()
	if err != nil {
		return err
	}
	defer c.Exit(tok)
	return f(c.Device.Primary())
}

// ordered runs the stream-ordered call f (an allocation from the pool, a
// free to it) with a zero context where the driver allows it: the stream
// names the context, so no lock is taken and calls run in parallel; with
// the primary context, which may be current anywhere, where it does not.
// The caller is counted in the life lock.
func (c *Config) ordered(f func(ctx cuda.Context) error) error {
	if c.Probe == nil {
		return f(c.Device.Primary())
	}
	return c.Probe.Do(c.Device.Primary(), c.Owner.Log, f)
}

// reserve reserves n bytes in the tenant's account. Where the device
// limit refuses, the pooled engines give back what they cache and it is
// tried again (Peers.atLimit).
func (c *Config) reserve(n uint64) (memtrack.Reservation, error) {
	r, err := c.Account.Reserve(n)
	if err != nil && deviceFull(err) {
		err = c.Peers.atLimit(nil, func() error {
			r, err = c.Account.Reserve(n)
			return err
		})
	}
	if err != nil && c.noQuota {
		err = c.deviceBound(err)
	}
	return r, err
}

// deviceBound is a tenant without a quota of its own refused by its
// account, whose limit is the device's: what refused it is the device
// limit (the figures are the device's), and the message says how to give
// the tenant a quota, rather than that it passed one it never had.
func (c *Config) deviceBound(err error) error {
	var qe *memtrack.QuotaError
	if !errors.As(err, &qe) || qe.Scope != memtrack.ScopeTenant {
		return err
	}
	q := *qe
	q.Scope, q.Used, q.Limit = memtrack.ScopeDevice, max(qe.Used, c.Tracker.Used()), c.Tracker.Limit()
	return fmt.Errorf("%w; the tenant has no memory quota of its own (WithMemoryQuota gives it one), so the device's limit bounds it alone", &q)
}

// deviceFull says err is the device limit's refusal. (Apart from reserve,
// so that errors.As's target is made on the heap only for an error.)
func deviceFull(err error) bool {
	var qe *memtrack.QuotaError
	return errors.As(err, &qe) && qe.Scope == memtrack.ScopeDevice
}

// Peers are the pooled engines of one device. Its zero value is empty.
type Peers struct {
	mu     lockorder.Mutex[lockorder.Peers]
	pools  map[*pooled]struct{} // guarded by mu
	idle   []idlePool           // guarded by mu: emptied pools kept for new tenants (idle.go)
	closed bool                 // guarded by mu
	// pressure counts the requests the device limit refused that are
	// trimming the engines' caches to try again: meanwhile a freed block
	// goes back to its pool, not onto a list, so that the request's next
	// trim can give its chunk back; back counts those frees and the
	// charges given back meanwhile, which are worth another try.
	pressure atomic.Int32  // atomic
	back     atomic.Uint64 // atomic
	// alone serialises the allocations the device limit had no room to
	// charge ahead, which are tried one at a time (charge.go).
	alone lockorder.Mutex[lockorder.Alone]
}

func (p *Peers) add(e *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pools == nil {
		p.pools = map[*pooled]struct{}{}
	}
	p.pools[e] = struct{}{}
}

func (p *Peers) remove(e *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pools, e)
}

func (p *Peers) list(except *pooled) []*pooled {
	p.mu.Lock()
	defer p.mu.Unlock()
	var l []*pooled
	for e := range p.pools {
		if e != except {
			l = append(l, e)
		}
	}
	return l
}

// trimOthers gives every other pooled engine's cache back to the driver,
// so that an allocation the driver refused can retry. It returns how many
// pools gave memory back.
func (p *Peers) trimOthers(except *pooled) int {
	n := 0
	for _, e := range p.list(except) {
		if e.trimForPeer() > 0 {
			n++
		}
	}
	return n
}

// trimCaches gives every pooled engine's cache back to the driver, self's
// too (the caller's, counted in its life lock already, or nil), and
// returns how many bytes of the device limit that freed.
func (p *Peers) trimCaches(self *pooled) (released uint64) {
	for _, e := range p.list(nil) {
		if e == self {
			n, _ := e.trim(false)
			released += n
			continue
		}
		released += e.trimForPeer()
	}
	return released
}

// limitRounds bounds how many times a request the device limit refuses
// trims the caches and tries again.
const limitRounds = 4

// atLimit runs try, a request the device limit just refused, again after
// the pooled engines gave back what they cache, for as long as the trims
// give memory back or blocks were freed meanwhile (a block freed during a
// trim is given back by the next), at most limitRounds times. It returns
// try's last error. self is the caller's engine, counted in its life lock,
// or nil; the caller holds nothing the engines' trims take.
func (p *Peers) atLimit(self *pooled, try func() error) error {
	p.pressure.Add(1)
	defer p.pressure.Add(-1)
	var err error
	for range limitRounds {
		back := p.back.Load()
		released := p.trimCaches(self)
		if err = try(); err == nil || !deviceFull(err) {
			return err
		}
		if released == 0 && p.back.Load() == back {
			return err
		}
	}
	return err
}

// underPressure says a request the device limit refused is trimming the
// caches: a freed block goes back to its pool (and is counted in back).
func (p *Peers) underPressure() bool {
	if p.pressure.Load() == 0 {
		return false
	}
	p.back.Add(1)
	return true
}

// gaveBack counts a charge given back while a request the device limit
// refused is trimming the caches.
func (p *Peers) gaveBack() {
	if p.pressure.Load() != 0 {
		p.back.Add(1)
	}
}
