package fcsp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/config"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/event"
	"github.com/fcsp-go/fcsp-go/internal/graphs"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/life"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/modules"
	"github.com/fcsp-go/fcsp-go/internal/smmove"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/internal/streams"
	"github.com/fcsp-go/fcsp-go/internal/teardown"
	"github.com/fcsp-go/fcsp-go/memtrack"
	"github.com/fcsp-go/fcsp-go/stream"
)

// Class is a stream's kind of work; see package stream.
type Class = stream.Class

// Stream classes.
const (
	ClassDefault   = stream.Default
	ClassAttention = stream.Attention
	ClassMemcpy    = stream.Memcpy
	ClassNCCL      = stream.NCCL
)

// Tenant is one request class's share of the GPU: its SMs, streams, memory
// quota and launch rate. Close it when done; a Tenant that becomes
// unreachable without Close is closed by the garbage collector, and its
// memory and SMs return to the pool. Its Streams, Modules and Events do not
// keep it reachable: hold the Tenant for as long as they are used (after
// the tenant is closed they return ErrClosed).
type Tenant struct {
	c *tenantCore
}

// tenantCore is what the pool tracks; the Tenant handle wraps it so that an
// unreachable handle can be detected and cleaned up. Its exported methods
// are the Tenant's, wrapped in tenant_api.go where the Tenant does not
// implement them itself.
type tenantCore struct {
	// set once before sharing: by NewTenant, before the tenant is listed.
	pool   *Pool
	name   string
	place  placement // where its work runs: a partition, or the whole device (internal/place)
	acct   *memtrack.Account
	adm    *admission.Tenant // its admission: limit, GPU share, metering, floor (internal/admission)
	mem    devmem.Allocator  // device memory: plain or pooled, chosen in NewTenant (memory.go)
	memOps *devmem.Config    // mem's: fills, copies and MemGetInfo, which allocate nothing

	// Hand-built (docs/LOCKS.md): calls in flight, which Close waits for
	// and Reshape pauses (internal/life); closed is set once, by the close
	// that holds closing.
	life   life.Lock   // own lock
	closed atomic.Bool // atomic

	// The fields above are read by every call; those after the pad are
	// written by NewStream, Close and Stats (mu among them): 128 bytes
	// apart, so that a storm of those calls does not make every call's
	// reads miss the cache. These, written once before the tenant is
	// listed or on no request's path (OnClose, Reshape, a first capture),
	// are part of the distance; the pad is the rest (a tenant is made and
	// closed 150,000 times a second in a server's storm: its size is
	// garbage).
	prio    config.Prio          // set once before sharing (NewTenant): WithPriority, WithBandwidthFloor (internal/config)
	cleanup runtime.Cleanup      // set once before sharing (NewTenant): closes a tenant whose handle the GC found unreachable
	handle  weak.Pointer[Tenant] // set once before sharing (NewTenant): for Pool.Tenant; weak, so the GC cleanup still runs
	first   Stream               // set once before sharing (NewTenant): the first stream (Tenant.Stream)
	class   *smmove.Class        // set once before sharing (NewTenant): a latency class's requests and moves (internal/smmove), nil for others

	// guarded by mu (below), and kept here for the distance.
	graphs  *graphs.Set           // guarded by mu: live graphs and execs, destroyed by Close; made by graphSet
	stop    func() bool           // guarded by mu: unregisters the context watcher
	onClose []func(Current) error // guarded by mu: OnClose's, run by close on the tenant's context
	_       [128 - 104]byte

	mu      lockorder.Mutex[lockorder.TenantMu] // protects the following fields, and the three above the pad; no driver call under it
	streams []*streamCore                       // guarded by mu: first.c among them, first
	modules modules.Set                         // guarded by mu: the loaded modules (internal/modules)
	gone    streams.Totals                      // guarded by mu: the closed streams' counters, for Stats (internal/streams)

	closing lockorder.Mutex[lockorder.TenantClosing] // held by the close under way, across its driver calls: a second close waits for it
	stall   atomic.Pointer[StallReport]              // atomic: set once, by the watchdog, when its work stalls (stall.go)

	// Each with a lock of its own.
	events event.Set      // own lock: the tenant's events (internal/event)
	dos    inside.Threads // own lock: OS threads inside Do (internal/inside)
}

// NewTenant makes a tenant. Without WithSMs, WithSMShare, WithRestOfSMs or
// WithRemainderSMs it is unpartitioned: it shares SMs with the other
// unpartitioned tenants (quotas and rate limits still apply), and those SMs
// are never a partition's. While no partition exists they are the whole
// device; once one does, the SMs no partition holds (the pool's commons),
// which follow the partitions as they are made, closed and reshaped: each
// such change holds the unpartitioned tenants' calls back while their
// streams move, as a Reshape holds a tenant's, and refuses with
// ErrInsideDo from inside one of their Dos. Where no SM is free they share
// the SMs of the tenant made WithRestOfSMs; with none to share, making one
// (or a partition that would take their last SMs) is ErrInsufficientSMs.
// A partition is returned once the work queued on its SMs before it took
// them (the unpartitioned tenants', a shrunk partition's) has run, at most
// 15 ms, as a growing Reshape waits.
func (p *Pool) NewTenant(name string, opts ...TenantOption) (*Tenant, error) {
	t, err := p.makeTenant(name, opts)
	if err != nil {
		return nil, tenantErr(name, "NewTenant", err)
	}
	return t, nil
}

// makeTenant is NewTenant, its errors bare: the options resolved, the
// tenant made through the pool's roster (internal/tenancy: admitted,
// built, listed, a partition handed over), then warmed.
func (p *Pool) makeTenant(name string, opts []TenantOption) (*Tenant, error) {
	cfg := configs.Get().(*tenantConfig)
	defer func() { *cfg = tenantConfig{}; configs.Put(cfg) }() // nothing of the tenant's keeps it
	if err := config.Apply(cfg, opts, tenantApplierOf); err != nil {
		return nil, err
	}
	limit, set := p.env.SMLimit(p.info.Index)
	if err := cfg.Resolve(name, limit, set, p.log); err != nil {
		return nil, err
	}
	if p.moves == nil {
		return nil, ErrClosed // Open failed before its engine
	}
	c := &tenantCore{pool: p, name: name, prio: cfg.Prio}
	if cfg.Latency.Min > 0 {
		c.class = &smmove.Class{Min: cfg.Latency.Min, Max: cfg.Latency.Max, Target: cfg.Latency.Target, Relative: cfg.Latency.Relative}
	}
	t := &Tenant{c}
	c.handle = weak.Make(t) // before it is listed: Pool.Tenant reads it
	// On a goroutine of its own: the runtime runs cleanups one at a time
	// on one goroutine, and a close waits for the tenant's calls and for
	// the moves it starts (the commons onto its SMs), which wait for other
	// tenants' calls: the process's other cleanups would wait behind them.
	c.cleanup = runtime.AddCleanup(t, func(c *tenantCore) {
		go func() { _ = c.close("tenant handle garbage-collected without Close") }()
	}, c)
	quota := cmp.Or(cfg.Quota, p.mem.Limit()) // none asked for: the device's limit
	if err := p.tenants.Make(c, (*member)(c), cfg, quota, c.class); err != nil {
		c.cleanup.Stop()
		return nil, err
	}
	return p.warmUp(t, nil, cfg)
}

// Build makes what a tenant is made of (tenancy.Tenant), outside the
// roster's lock: its placement (the partition it is given, else the
// pool's), account, admission, first stream and memory engine. On an error
// the roster undoes what it made (Unbuild).
func (m *member) Build(cfg *tenantConfig, part *smpart.Partition, quota uint64) (err error) {
	c, p := (*tenantCore)(m), m.pool
	c.place = p.plainFor(c, cfg)
	if part != nil {
		c.place = greenPlace(part)
	}
	// A quota the pool could never grant: more than the device's limit,
	// wherever that limit comes from.
	if err := p.env.CheckQuota(p.info.Index, p.info.TotalMemory, p.mem.Limit(), quota); err != nil {
		return err
	}
	if c.acct, err = p.mem.NewAccount(c.name, quota); err != nil {
		return err
	}
	if c.adm, err = c.newAdmission(cfg); err != nil {
		return err
	}
	first, err := c.newStream(cfg.Class, true)
	if err != nil {
		return err
	}
	c.streams, c.first = append(c.streams, first), Stream{c: first, gen: first.Gen()}
	return c.openMemory(cfg, quota)
}

// Unbuild undoes Build, what of it was made, in the order close lets a
// tenant's things go: a tenant that was never listed, on which no call was
// made.
func (m *member) Unbuild() error {
	var errs [4]error
	c := (*tenantCore)(m)
	cc := c.cctx()
	if c.mem != nil {
		errs[0] = c.mem.Close(cc, nil)
	}
	if len(c.streams) > 0 {
		first := c.streams[0]
		errs[1] = errors.Join(first.destroy(cc), c.releaseShared(first))
		first.retire(false)
		c.streams, c.first = nil, Stream{}
	}
	if c.adm != nil {
		c.adm.Close()
	}
	if c.acct != nil {
		_, errs[2] = c.acct.Close()
	}
	errs[3] = c.place.Close()
	return c.pool.fault.Forgive(errors.Join(errs[:]...))
}

// Close closes a listed tenant whose partition could not be handed over
// (tenancy.Tenant).
func (m *member) Close() error { return (*tenantCore)(m).close(teardown.Closed) }

// Pool is the pool the tenant belongs to.
func (t *Tenant) Pool() *Pool {
	defer runtime.KeepAlive(t)
	return t.c.pool
}

// Name is the tenant's name.
func (t *Tenant) Name() string {
	defer runtime.KeepAlive(t)
	return t.c.name
}

// SMs is Tenant.SMs, for the SDK's own callers.
func (c *tenantCore) SMs() int { return c.place.SMs() }

// Context is the tenant's CUcontext (the green context's, or the device's
// primary context for an unpartitioned tenant), for other bindings. A green
// context may be current on one thread at a time, and the handle is valid
// only while the Tenant is open and reachable; 0 once it is closed.
func (t *Tenant) Context() uintptr {
	defer runtime.KeepAlive(t)
	if t.c.closed.Load() {
		return 0 // destroyed, or about to be
	}
	return uintptr(t.c.place.Context())
}

// Stream is the tenant's first stream. It does not keep the tenant
// reachable.
func (t *Tenant) Stream() *Stream {
	defer runtime.KeepAlive(t)
	return &t.c.first
}

// cctx is the tenant's CUDA context handle (a cuda.Context is cc, a
// context.Context ctx, throughout fcsp).
func (c *tenantCore) cctx() cuda.Context { return c.place.Context() }

// do runs f counted in the tenant's life lock (call) with the device's
// primary context for the driver calls that need one current. Every
// driver call the SDK makes outside Do (memory figures, allocation,
// streams, events, modules, copies, memsets) works so on green streams and
// serves the green contexts (docs/CONTEXTS.md), and the primary context
// may be current on any number of threads: none of them waits for a Do.
// Graph instantiation, whose result keeps the SMs of the context it was
// made in, takes one of the partition's slots instead (graph.go).
func (c *tenantCore) do(f func(cc cuda.Context) error) error {
	return c.call(func() error { return f(c.pool.dev.Primary()) })
}

// primary is do's context for a caller counted in the life lock already.
func (c *tenantCore) primary(f func(cc cuda.Context) error) error { return f(c.pool.dev.Primary()) }

// SetSMLimit changes the tenant's launch-rate limit (its GPU share under
// WithGPUShare) within one refill period: the tokens it has saved scale
// with the limit, and launches waiting for tokens are charged again at the
// new one. A tenant made without WithSMLimit cannot be limited later.
func (t *Tenant) SetSMLimit(f float64) error {
	defer runtime.KeepAlive(t)
	c := t.c
	if c.closed.Load() {
		return c.fail("SetSMLimit", ErrClosed)
	}
	if !c.adm.Limited() {
		return c.fail("SetSMLimit", errNotLimited)
	}
	return c.fail("SetSMLimit", c.adm.SetSMLimit(f))
}

// graphSet is the tenant's graphs.Set, made at its first capture: most
// tenants capture none, and the set was garbage of every one made. Every
// other use of c.graphs follows a capture of the tenant (its Graph, its
// exec) or the end of the tenant's calls (close), so it sees the set made
// here, under mu.
func (c *tenantCore) graphSet() *graphs.Set {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.graphs == nil {
		c.graphs = graphs.New(c.pool.drv)
	}
	return c.graphs
}

// configs recycles NewTenant's configurations: the options are funcs, and
// the making is the roster's (through tenancy.Tenant), so the one they
// fill escapes, which was an allocation per tenant made.
var configs = sync.Pool{New: func() any { return new(tenantConfig) }}

// host is the tenant as its engines see it (admission.Host, devmem.Owner):
// a conversion of the core's pointer, so that handing it over makes none
// of the closures that were garbage of every tenant made.
type host tenantCore

func (h *host) Enter() (uint32, error)  { return (*tenantCore)(h).enter() }
func (h *host) Exit(slot uint32)        { h.life.Exit(slot) }
func (h *host) Closed() bool            { return h.closed.Load() }
func (h *host) Primary() cuda.Context   { return h.pool.dev.Primary() }
func (h *host) AnyThread() cuda.Context { return h.place.AnyThread() }
func (h *host) Log(msg string)          { h.pool.log.Info(msg) }

// newAdmission makes the tenant's admission engine from cfg.
func (c *tenantCore) newAdmission(cfg *tenantConfig) (*admission.Tenant, error) {
	p := c.pool
	return admission.NewTenant(&p.prio, admission.Config{
		SMLimit: cfg.SMLimit, GPUShare: cfg.GPUShare,
		SMs: c.place.SMs(), ThreadsPerSM: p.info.ThreadsPerSM, Dampening: p.cfg.Dampening, Penalty: p.cfg.Penalty,
		Refill: cmp.Or(cfg.Refill, p.cfg.Refill), Clock: cfg.Clock,
		Metered: cfg.Metered, Latency: cfg.Prio.Prio == config.LatencyCritical, Floor: cfg.Prio.Floor,
		Events: p.drv, Host: (*host)(c), Partitioned: c.place.Partitioned(),
	})
}

// Stats is a snapshot of a tenant's use.
type Stats struct {
	Name        string
	Closed      bool // the tenant is closed (or closing): the figures are what was left
	SMs         int
	Partitioned bool    // the tenant has SMs of its own
	SMShare     float64 // SMs as a fraction of the device's (what WithSMShare picked, for one); 1 for an unpartitioned tenant, which shares all of them
	// ReshapeSizes lists the SM counts a reshapable tenant can take
	// (WithReshapeSizes, WithLatencyTarget, and the rest tenant that trades
	// with a latency class), ascending; nil for a tenant that cannot be
	// reshaped. The list is shared by every snapshot (Stats makes no
	// garbage): do not modify it.
	ReshapeSizes []int
	MemoryUsed   uint64
	MemoryLimit  uint64
	MemoryCached uint64        // freed pool blocks kept on the streams' free lists (WithMemoryPool)
	SMLimit      float64       // 0: unlimited
	Launches     uint64        // admitted kernel launches, all streams
	Throttled    uint64        // launches and Do calls that had to wait for tokens
	ThrottleWait time.Duration // time both spent waiting for tokens
	Streams      int

	// Do's part of Throttled and ThrottleWait, and the Do calls the GPU
	// share's bucket admitted (WithGPUShare below 1, or with a bandwidth
	// floor; other Dos are not rate-limited and not counted). The ratios
	// that stay within 0..1 are DoThrottled/DoAdmitted for Do and
	// (Throttled-DoThrottled)/Launches for kernel launches.
	DoAdmitted     uint64
	DoThrottled    uint64
	DoThrottleWait time.Duration

	// GPU time (WithGPUMetering, WithGPUShare): run time measured on the
	// GPU clock, once its events have completed, of kernels and graphs
	// launched through the SDK and of the work Do's f queues on streams it
	// took from Current.Stream (from taking the handle to f's return). Work
	// on other streams, or on a handle taken otherwise, is not counted.
	GPUShare       float64 // WithGPUShare's fraction; 0: none
	GPUTime        time.Duration
	GPUTimeByClass map[Class]time.Duration

	// Memory bandwidth: WithBandwidthFloor's floor and what it cost
	// (BandwidthStats).
	Bandwidth BandwidthStats

	// SMMoves counts the moves of a latency class's SMs
	// (WithLatencyTarget) and SMMoveReason says why the last was made (or
	// refused); SMMovesBy counts them by the rule that made them, and
	// LatencyTarget is the class's P99 target. Zero for other tenants.
	SMMoves       uint64
	SMMoveReason  string
	SMMovesBy     SMMoveCounts
	LatencyTarget time.Duration
	// SMMoveTime is the latency class's moves' times, from the
	// controller's decision to the new SMs serving (the hand-over wait
	// included); BurstRecovery, its bursts' times from their first request
	// to their P99 back within target.
	SMMoveTime, BurstRecovery Histogram

	// Stalled is the tenant's stall (WithStallTimeout), nil while its work
	// makes progress.
	Stalled *StallReport

	// ContextWait is how long calls waited for one of the tenant's contexts
	// (Do, and the few driver calls that need the context current): the
	// exclusion a partitioned tenant's callers share. Zero for an
	// unpartitioned tenant, whose context never excludes.
	ContextWait WaitStats
}

// Histogram is a histogram of durations: Le[i] counts those at most
// MoveBounds[i]; Count and Total all of them (it adds up across tenants
// and processes).
type Histogram struct {
	Count uint64
	Total time.Duration
	Le    [12]uint64
}

// MoveBounds are the upper bounds of a Histogram's buckets: from a move's
// hundred microseconds to a burst's second.
var MoveBounds = [12]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
	2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// SMMoveCounts counts a latency class's SM moves by the rule that made
// each (Stats.SMMovesBy).
type SMMoveCounts struct {
	GrowLoad uint64 // more requests in flight than its SMs were sized for
	GrowP99  uint64 // its recent P99 over target, two requests or more over it, further apart than a host stall
	Shrink   uint64 // the load asked for less for 50 ms (for the floor, 15 ms), the P99 within target or nothing in flight
	Trim     uint64 // a full load's P99 within 85% of target, and within it scaled to a step less, 50 ms after the last move: one step less for bursts
}

// WaitStats summarises waits: how many calls waited at all, and quantiles of
// the wait over the recent calls (those that did not wait count as 0).
type WaitStats struct {
	Calls  uint64        // calls that took a context
	Waited uint64        // of those, calls that found none free
	P50    time.Duration // over the last calls (a window of a few thousand)
	P99    time.Duration
	Max    time.Duration
	// Total and Le are a histogram of every wait since the tenant was
	// made, which adds up across tenants and processes: Total is the sum
	// of the waits, Le[i] counts the calls that waited at most
	// WaitBounds[i] (those that did not wait count in every bucket).
	Total time.Duration
	Le    [12]uint64
}

// Stats is Tenant.Stats, for the SDK's own callers.
func (c *tenantCore) Stats() Stats {
	s := Stats{Name: c.name, SMs: c.place.SMs(), Partitioned: c.place.Partitioned(), MemoryUsed: c.acct.Used(), MemoryLimit: c.acct.Limit(), Closed: c.closed.Load(),
		Stalled: c.stall.Load()}
	s.SMShare = float64(s.SMs) / float64(c.pool.info.SMs)
	if c.place.Reshapable() {
		s.ReshapeSizes = c.place.Sizes()
	}
	s.ContextWait = c.place.waits()
	var gates admission.GateSums // added up in place: Stats is polled, and a copy of the gates was garbage
	c.mu.Lock()
	s.Streams = len(c.streams)
	s.Launches, gates = c.gone.Launches, c.gone.Gates // the closed streams': the counters only go up
	for _, st := range c.streams {
		s.MemoryCached += st.Blocks().Bytes()
		s.Launches += st.Launches()
		st.Gate().AddTo(&gates)
	}
	c.mu.Unlock()
	a := c.adm.Stats(&gates)
	s.SMLimit, s.GPUShare, s.GPUTime = a.SMLimit, a.GPUShare, a.GPUTime
	s.Throttled, s.ThrottleWait = a.Throttled, a.ThrottleWait
	s.DoAdmitted, s.DoThrottled, s.DoThrottleWait = a.DoAdmitted, a.DoThrottled, a.DoThrottleWait
	s.GPUTimeByClass = a.GPUTimeByClass
	if c.class != nil {
		var by smmove.Counts
		s.SMMoves, by, s.SMMoveReason, s.LatencyTarget = c.class.Stats()
		s.SMMovesBy = SMMoveCounts(by)
		moves, rec := c.class.Times()
		s.SMMoveTime, s.BurstRecovery = Histogram(moves), Histogram(rec)
	}
	s.Bandwidth = BandwidthStats{Priority: Priority(c.prio.Prio), Floor: c.prio.Floor, FlooredLaunches: a.Floored, BytesMoved: a.Bytes,
		BytesPerSecond: a.BytesPerSecond, Slowdown: a.Slowdown}
	return s
}

func (c *tenantCore) close(why string) error {
	// Another close (the tenant's context, the garbage collector, the
	// pool) may be under way: returning before it ends would let the caller
	// see memory still counted, or unmap the shared region under it, so a
	// second close waits for the first's lock.
	c.closing.Lock()
	ended, err := c.end(why)
	c.closing.Unlock()
	if ended && c.place.Partitioned() {
		// The unpartitioned tenants may grow onto its SMs: a move, which
		// may wait for their calls, so not under closing (docs/LOCKS.md).
		c.pool.moves.Released()
	}
	return err
}

// end is close's work under closing: ended is false where another close
// did it.
func (c *tenantCore) end(why string) (ended bool, err error) {
	if !c.closed.CompareAndSwap(false, true) {
		return false, nil
	}
	c.pool.tenants.Leaving((*member)(c)) // no move of its SMs from here on, nor a look at its streams
	c.adm.Close()                        // launches waiting for tokens return ErrClosed
	if r := c.stall.Load(); r != nil {
		return true, c.abandon(r) // its calls in flight may never end
	}
	c.life.End() // wait for launches and synchronisations in flight
	hookErr := c.runOnClose()
	c.mu.Lock()
	stop := c.stop // written by CloseWhenDone, maybe as this close starts
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	p := c.pool
	var errs [8]error // on the stack: a tenant closed makes no garbage here
	cc := c.cctx()
	leaks := c.acct.Live()
	// The memory engine lists the streams itself (host.Streams), where
	// it must wait for them; nothing can add one any more.
	errs[0], errs[1] = hookErr, c.mem.Close(cc, leaks)
	c.mu.Lock()
	streams := c.streams
	c.streams = nil
	c.mu.Unlock()
	for _, s := range streams {
		errs[2] = errors.Join(errs[2], s.destroy(cc)) // nil, with no garbage, while both are
		errs[2] = errors.Join(errs[2], c.releaseShared(s))
		s.retire(false) // its handles answer ErrClosed; the core is reused
	}
	errs[3] = c.events.Close(p.drv, cc)
	if c.graphs != nil { // a capture made it (graphSet)
		errs[4] = c.graphs.Close(cc)
	}
	errs[5] = c.modules.Close(&c.mu, p.dev, cc)
	_, errs[6] = c.acct.Close()
	errs[7] = p.tenants.Leave(c, (*member)(c)) // its placement retired, off the pool's list last
	teardown.Reclaimed(p.log, c.name, why, len(leaks))
	return true, p.fault.Forgive(errors.Join(errs[:]...))
}

// CloseWhenDone closes the tenant when ctx is done (WithContext;
// tenancy.Tenant).
func (m *member) CloseWhenDone(ctx context.Context) {
	c := (*tenantCore)(m)
	stop := context.AfterFunc(ctx, func() { _ = c.close("context done: " + context.Cause(ctx).Error()) })
	c.mu.Lock()
	c.stop = stop
	c.mu.Unlock()
}

// OnClose registers f to run when the tenant closes (Close, Shutdown,
// WithContext's end, the garbage collector, the pool's Close), before its
// streams, memory and context go: on a locked OS thread with one of the
// tenant's contexts current, as in Do, so that library handles made inside
// Do (a cuBLAS handle, a cuDNN handle, a TensorRT context) are destroyed on
// the context they belong to, as net/http's Server.RegisterOnShutdown runs
// a server's. The functions run in the order registered, each once; their
// errors (and panics, as errors) are joined to Close's. f must not call the
// tenant's Do; its Close there is ErrInsideDo. A nil f is
// ErrInvalidArgument; on a closed tenant, ErrClosed.
func (t *Tenant) OnClose(f func(Current) error) error {
	defer runtime.KeepAlive(t)
	c := t.c
	if f == nil {
		return c.fail("OnClose", errNilFunc)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return c.fail("OnClose", ErrClosed)
	}
	c.onClose = append(c.onClose, f)
	return nil
}

// runOnClose runs the OnClose functions (internal/teardown) as a Do's f,
// after the calls in flight have ended (so a green context is free) and
// before anything is destroyed.
func (c *tenantCore) runOnClose() error {
	c.mu.Lock()
	hooks := c.onClose
	c.onClose = nil
	c.mu.Unlock()
	if len(hooks) == 0 {
		return nil
	}
	run := func(cur Current) error { return teardown.Run(hooks, cur) }
	if err := c.doOnThread(context.Background(), "", run, nil, false); err != nil {
		return fmt.Errorf("OnClose: %w", err) // the close's caller names the tenant
	}
	return nil
}
