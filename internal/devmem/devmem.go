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
package devmem

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Allocator is a tenant's device memory. Alloc, Free and Flush are called
// by a caller counted in the tenant's life lock (Config.Enter), so that the
// tenant's Close waits for them; Trim and Reserved count themselves in;
// Close is called once no call is in flight, and the last.
type Allocator interface {
	// Alloc allocates n bytes (n > 0), in order on s where the engine
	// orders allocations, after reserving them in the tenant's account.
	// Over the quota it fails with a *memtrack.QuotaError or an error
	// that matches memtrack.ErrQuotaExceeded; a driver failure gives the
	// reservation back.
	Alloc(s Stream, n uint64) (cuda.DevicePtr, error)
	// Free frees p, allocated by Alloc, in order on s. A pointer the
	// account does not hold is refused with its error, changing nothing.
	Free(s Stream, p cuda.DevicePtr) error
	// Flush gives the blocks kept for s back to the driver, in order on s:
	// the stream is closing.
	Flush(s Stream) error
	// Trim gives what the tenant caches back to the driver (its streams'
	// lists, then its pool's cache), waiting for the streams that freed
	// blocks. A plain engine caches nothing.
	Trim() error
	// Reserved is how many bytes the tenant's pool holds from the driver:
	// allocated, cached on the lists and by the driver (0 without one).
	Reserved() (uint64, error)
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
	// does (Trim waits so before it trims the pool).
	Synchronize() error
}

// Owner is what the engine needs of its tenant.
type Owner interface {
	// Enter counts a call in the tenant's life lock, or fails (closed, or
	// the device lost); Exit counts it out with Enter's token.
	Enter() (token uint32, err error)
	Exit(token uint32)
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
	// Info caches the device's memory figures for MemInfo. One per device.
	Info *InfoCache
	// Owner is the tenant: one interface it implements rather than a func
	// per need, each of which was an allocation per tenant made.
	Owner
	// Probe, set where the tenant's streams are a partition's (green
	// contexts), remembers for the device whether the driver takes
	// stream-ordered pool calls with no context current (ProbeYes,
	// ProbeNo); those calls then go so where it does, and in the primary
	// context otherwise, as they always do without Probe. The Owner's Log
	// hears when the driver refuses. (Fields derived rather than kept:
	// the Config is copied into every tenant's engine.)
	Probe *atomic.Int32
}

// What Config.Probe holds: whether the driver takes stream-ordered calls
// with no context current (the stream naming it) is learned on first use.
const (
	ProbeUnknown int32 = iota
	ProbeYes
	ProbeNo
)

// tenant is the tenant's name, for errors: its account's.
func (c *Config) tenant() string { return c.Account.Name() }

// do runs f with the primary context, counted in the tenant's life lock.
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
// names the context, so no lock is taken and calls run in parallel. The
// caller is counted in the life lock.
func (c *Config) ordered(f func(ctx cuda.Context) error) error {
	if c.Probe == nil {
		return f(c.Device.Primary()) // primary contexts may be current anywhere
	}
	switch c.Probe.Load() {
	case ProbeYes:
		return f(0)
	case ProbeNo:
		return c.do(f)
	}
	err := f(0)
	switch {
	case err == nil:
		c.Probe.Store(ProbeYes)
	case errors.Is(err, cuda.ErrorInvalidContext), errors.Is(err, cuda.ErrorInvalidHandle):
		c.Probe.Store(ProbeNo)
		c.Owner.Log("driver needs a current context for launches/synchronisation; serialising per green context")
		return c.do(f)
	}
	return err
}

// reserve reserves n bytes in the tenant's account. Freed blocks kept by
// pooled tenants count against the device limit: refused by it, they are
// given back to the driver and the reservation tried once more.
func (c *Config) reserve(n uint64) (memtrack.Reservation, error) {
	r, err := c.Account.Reserve(n)
	if err != nil && deviceFull(err) && c.Peers.trimCaches() {
		r, err = c.Account.Reserve(n)
	}
	return r, err // memtrack's errors name the tenant already
}

// deviceFull says err is the device limit's refusal. (Apart from reserve,
// so that errors.As's target is made on the heap only for an error.)
func deviceFull(err error) bool {
	var qe *memtrack.QuotaError
	return errors.As(err, &qe) && qe.Scope == memtrack.ScopeDevice
}

// Peers are the pooled engines of one device. Its zero value is empty.
type Peers struct {
	mu     sync.Mutex
	pools  map[*pooled]struct{}
	idle   []idlePool // emptied pools kept for new tenants (idle.go)
	closed bool
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
// so that an allocation that found the device full can retry. It returns
// how many pools it trimmed.
func (p *Peers) trimOthers(except *pooled) int {
	n := 0
	for _, e := range p.list(except) {
		if e.Trim() == nil {
			n++
		}
	}
	return n
}

// trimCaches empties every pooled engine's free lists (the caller's own
// too), so that an allocation refused by the device limit, which counts
// cached blocks, can retry. It reports whether any bytes were cached.
func (p *Peers) trimCaches() bool {
	cached := false
	for _, e := range p.list(nil) {
		streams := e.cfg.Streams()
		for _, s := range streams {
			cached = cached || s.Blocks().Bytes() > 0
		}
		e.cfg.ReleaseStreams(streams)
		_ = e.Trim() // the driver's pool gives back what it kept, too
	}
	return cached
}
