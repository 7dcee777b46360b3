// Package admission is fcsp's admission engine: what a launch, a graph
// launch, a Reservation or a metered Do passes before its work is queued.
//
// NewTenant makes a tenant's engine once, from its options: a pricer, what
// its limit charges (a launch-rate limit's threads, a GPU share's
// predicted GPU time, raised at a bandwidth floor while a latency tenant
// is busy, or nothing), and a waiter, how an admission waits for the price
// (plainly, or until the latency tenants go idle). Init makes a stream's
// Gate once, with the stream: a bucket of the tenant's limiter (none: its
// work is admitted free) and a meter (none: untimed). Nothing asks again
// which was chosen. A caller checks its arguments, enters its life lock
// and asks its Gate for a Ticket (Admit, TryAdmit, a Reservation's Wait,
// AdmitGraph): the gate opens the ticket (a metered gate first folds in
// what completed) and the tenant charges it, on one path (charge.go) that
// a metered Do's admission (BeginDo) takes too. The caller queues timed
// work through its ticket (Ticket.Time), which settles itself when the
// work is seen complete; a ticket whose work never ran gives back what it
// took (Cancel), as golang.org/x/time/rate's Reservation does.
//
// A throughput class beside a latency class may be held to a queue bound
// (Tenant.SetQueueBound, queue.go; off unless the engine turns it on):
// its next launch or Do is admitted only while the GPU time it has queued
// is under a horizon, so that a growth of the latency class, which waits
// for the work queued on the SMs it takes, waits for about the kernel
// running. What the class gives up is queue depth: its goroutines wait in
// admission rather than in a Synchronize (TryLaunch and TryDo are refused
// ErrThrottled), and work it runs side by side on several streams is
// counted as if run one after another, so it overlaps less. With a
// horizon longer than the host takes to react (a waiting admission wakes
// on the prediction of when the kernel running ends: some tens of
// microseconds late) the GPU does not idle between its kernels; that it
// loses nothing measurable in steady state is for the GPU to show
// (docs/BENCHMARKS.md). Off it costs a metered admission one atomic load.
//
// The parts, one file each, in layers; a part calls those below it:
//
//	Gate (gate.go)  Ticket, Reservation (ticket.go)  Run, BeginDo (do.go)   the entry points fcsp calls
//	charge path (charge.go)  queue bound (queue.go)                         Tenant.charge: price, take; enqueue
//	waiter (wait.go)                                                        plain; floorWait, until idle
//	meter (meter.go)                                                        events, polls, settling
//	pricer, quote, charge (price.go); floored (floor.go)                   what the limit charges
//	Pool (latency.go)  bandwidth (bandwidth.go)  Estimate (estimate.go)     what the others count
//	tokenbucket (Limiter, Stream, Waiting), Events (the driver)             below the package
//
// Two calls go up, both reports of what was measured or seen: a meter
// hands a Do's bracket, measured or lost, to its Runs (bracket.measured,
// bracket.lost, do.go), and Pool.Refresh reads the busy latency streams'
// meters. Nothing calls back
// from tokenbucket: a wait that a change of share makes stale returns
// (tokenbucket.ErrLimitChanged) and the waiter prices it again. Tenant
// (admission.go, stats.go) is the state the parts share: the chosen
// pricer and waiter, the GPU-time accounts, the list of meters, the host.
//
// The package sees a stream only as its handle, class and events; it calls
// the driver through Events, which the pool's guarded driver implements
// (the fake driver drives the tests). It never imports fcsp.
//
// # Lock order
//
// This package's slice of docs/LOCKS.md, each lock's level there in
// parentheses (a lock is taken only under those above it):
//
//	smmove Engine.mu (5)            the controller's start bounds the rest's queue (SetQueueBound)
//	  admission Tenant.mu (17)      the metered streams' meters (copy on write), the Do meter's making, SetQueueBound
//	    admission meter.mu (19)     SetQueueBound charges each meter's queued work, one meter at a time
//	      admission Run.mu (20)     a bracket measured or lost (a poll, a stream's close) goes to its runs; Run.take
//	fcsp tenantCore.mu (6)          Stats and a stream's Close add up its gates (Gate.AddTo)
//	  admission meter.mu (19)
//	admission Pool.mu (16)          the latency streams' meters (copy on write); a leaf
//	admission doMeter.mu (18)       the Do runs by OS thread; a leaf
//	admission Tenant.turn           outside the ranks (a one-slot channel): the queue bound's waiters
//
// Outside the ranks: fcsp's life lock (Host.Enter) is entered before a
// meter's mu, never under one, and tokenbucket's locks are below all of
// these (the Do's bucket is made under Tenant.mu). A meter's mu is held
// across the caller's queue in Ticket.Time, which must take none of
// these. Pool.Refresh only tries a meter's (TryLock). The queue bound's
// turn (queue.go) is taken under none of them; its holder enters the life
// lock and holds one meter's mu at a time while it looks. fcsp's tests run
// with the ranks checked (internal/lockorder).
package admission

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/stream"
)

// Events is the driver the meter needs: events around timed work, and
// their queries. fcsp passes the pool's guarded driver.
type Events interface {
	EventCreate(c cuda.Context, flags uint32) (cuda.Event, error)
	EventRecord(c cuda.Context, e cuda.Event, s cuda.Stream) error
	EventQuery(c cuda.Context, e cuda.Event) error
	EventElapsedMs(c cuda.Context, start, end cuda.Event) (float32, error)
	EventDestroy(c cuda.Context, e cuda.Event) error
}

// ErrTakenAfterDo: a Current used after its Do returned.
var ErrTakenAfterDo = fmt.Errorf("%w: called after its Do returned; a Current is valid during its call of f", errs.ErrInvalidArgument)

// classes sizes the per-class GPU-time accounts.
const classes = int(stream.NCCL) + 1

// Config is a tenant's admission, as NewTenant chose it.
type Config struct {
	// A launch-rate limit (SMLimit > 0) or a GPU share (GPUShare > 0),
	// at most one; neither: not limited.
	SMLimit, GPUShare float64
	SMs, ThreadsPerSM int // the launch-rate model's device
	Dampening         float64
	Penalty           float64
	Refill            time.Duration // 0: tokenbucket's default
	Clock             func() int64  // nil: monotonic

	Metered bool // time work on the GPU clock (implied by GPUShare)
	Latency bool // LatencyCritical: its work in flight holds floored tenants down
	// Partitioned: the tenant's Do holds one of few green contexts. (With
	// the flags: the Tenant copies its Config, made per tenant.)
	Partitioned bool
	Floor       float64 // WithBandwidthFloor, which acts on a GPU share; 0: none

	Events Events
	// Host is the tenant the engine serves. One interface, which the
	// tenant implements, rather than a func per need: each method value
	// was an allocation per tenant made.
	Host
}

// Host is what the engine needs of its tenant.
type Host interface {
	// Enter counts a call in the tenant's life lock (an error: closed, or
	// the device lost), Exit ends it. The engine takes no closure from
	// its host: a closure through a func value would escape, one
	// allocation per metered Do.
	Enter() (uint32, error)
	Exit(slot uint32)
	// Closed reports whether the tenant is closed (or closing).
	Closed() bool
	// Primary is the device's primary context, current on any thread.
	Primary() cuda.Context
	// AnyThread is the tenant's context a query may use from any thread
	// (0: none, a partition's).
	AnyThread() cuda.Context
	// Log hears once-only notices.
	Log(msg string)
}

// Tenant is one tenant's admission engine.
type Tenant struct {
	cfg  Config // set once before sharing
	pool *Pool  // set once before sharing
	// set once before sharing: the engine, chosen in NewTenant.
	price pricer // what the limit charges (price.go, floor.go)
	wait  waiter // how an admission waits for it (wait.go)
	// set once before sharing: when a limited Do folds in what completed:
	// before its admission, or, a partition's, at its end (BeginDo says
	// why).
	pollBefore, pollAfter func(*Tenant) error

	gpu     [classes]atomic.Int64   // atomic; ns of completed work per class
	floored atomic.Uint64           // atomic; launches admitted at the floor
	bytes   atomic.Uint64           // atomic; declared bytes of completed launches
	dm      atomic.Pointer[doMeter] // atomic; the Do meter, stored once under mu (doMeter)

	mu     lockorder.Mutex[lockorder.AdmTenant] // serialises changes of meters, the Do meter's making, and SetQueueBound
	meters atomic.Pointer[[]*meter]             // atomic; written under mu: the metered streams' meters (copy on write: Poll takes no lock)

	// The queue bound (queue.go): the horizon in ns (0: off, one load per
	// metered admission), the prediction of when the work admitted under
	// it is done (monotonic ns), the sum of its corrections (queue.go,
	// own), and the turn of its waiters (made, under mu, before the first
	// horizon is stored).
	horizon atomic.Int64  // atomic
	qtat    atomic.Int64  // atomic
	qshift  atomic.Int64  // atomic
	transit atomic.Int64  // atomic; admissions charged to qtat that no meter has seen yet (queue.go, land)
	turn    chan struct{} // guarded by mu: made under it, once, before the first horizon is stored; enqueue reads it without mu once it has loaded a horizon > 0
}

// NewTenant makes a tenant's admission engine from cfg: its pricer and
// its waiter, chosen here once.
//
// A plain cfg (Config.Plain) gets the pool's one plain engine rather than
// an engine of its own: it keeps nothing of its tenant, and a server that
// makes and closes tenants made 208 bytes of garbage with each.
func NewTenant(p *Pool, cfg Config) (*Tenant, error) {
	// A GPU share prices by measured time, and a latency tenant's work in
	// flight is known by its events: both time their work.
	cfg.Metered = cfg.Metered || cfg.GPUShare > 0 || cfg.Latency
	if cfg.Plain() {
		return p.plainEngine(cfg.Events), nil
	}
	t := newEngine(p, cfg)
	switch {
	case cfg.GPUShare > 0:
		gt, err := newGPUTime(&cfg)
		if err != nil {
			return nil, err
		}
		t.price = gt
		if cfg.Floor > 0 {
			t.price, t.wait = floored{gpuTime: gt, floor: cfg.Floor, pool: p}, floorWait{p}
		}
		if cfg.Partitioned {
			t.pollBefore, t.pollAfter = pollNot, pollNow
		}
	case cfg.SMLimit > 0:
		lr, err := newLaunchRate(&cfg)
		if err != nil {
			return nil, err
		}
		t.price = lr
	}
	return t, nil
}

// newEngine is an engine for cfg that limits nothing and waits plainly.
func newEngine(p *Pool, cfg Config) *Tenant {
	return &Tenant{cfg: cfg, pool: p, price: unlimited{}, wait: plain{}, pollBefore: pollNow, pollAfter: pollNot}
}

func pollNow(t *Tenant) error { return t.Poll() }
func pollNot(*Tenant) error   { return nil }

// Plain reports whether cfg asks for nothing to admit: no launch-rate
// limit or GPU share, no metering, no bandwidth floor, not latency
// critical. Its gates are free (a launch on them costs one load), it
// times nothing and counts nothing, and its host is never called: one
// engine serves every plain tenant of a pool, with no host.
func (cfg *Config) Plain() bool {
	return cfg.SMLimit == 0 && cfg.GPUShare == 0 && !cfg.Metered && !cfg.Latency && cfg.Floor == 0
}

// plainEngine is the pool's engine for plain tenants, made at the first.
func (pp *Pool) plainEngine(ev Events) *Tenant {
	if t := pp.plain.Load(); t != nil {
		return t
	}
	t := newEngine(pp, Config{Events: ev})
	if !pp.plain.CompareAndSwap(nil, t) {
		return pp.plain.Load()
	}
	return t
}

// do runs f in the tenant's life lock with the primary context, current
// on any thread.
func (t *Tenant) do(f func(cuda.Context) error) error {
	slot, err := t.cfg.Enter()
	if err != nil {
		return err
	}
	defer t.cfg.Exit(slot)
	return f(t.cfg.Primary())
}

// doWith is do with ctx, a context current on the calling thread (a Do's).
func (t *Tenant) doWith(ctx cuda.Context, f func(cuda.Context) error) error {
	slot, err := t.cfg.Enter()
	if err != nil {
		return err
	}
	defer t.cfg.Exit(slot)
	return f(ctx)
}

// Limited reports whether the tenant has a launch-rate limit or a GPU
// share.
func (t *Tenant) Limited() bool { return t.price.limiter() != nil }

// SetSMLimit changes the limit (the share, under a GPU share) of a
// Limited tenant; it applies from the next admission, and wakes the
// waiting ones to price again.
func (t *Tenant) SetSMLimit(f float64) error { return t.price.limiter().SetSMLimit(f) }

// SetSMs resizes a launch-rate limit to a reshaped tenant's SMs; a GPU
// share is of the device's time whatever the SMs.
func (t *Tenant) SetSMs(sms int) error { return t.price.setSMs(sms) }

// Capacity is a Limited tenant's bucket's capacity (one refill period's
// tokens).
func (t *Tenant) Capacity() float64 { return t.price.limiter().Capacity() }

// Close closes the limiter: admissions waiting for tokens return ErrClosed.
func (t *Tenant) Close() { t.price.close() }

// Metered reports whether the tenant's Dos are metered (BeginDo has
// anything to do): one load the caller's Do inlines.
func (t *Tenant) Metered() bool { return t.cfg.Metered }

// listMeter adds m to the metered streams' meters, or removes it.
func (t *Tenant) listMeter(m *meter, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next []*meter
	if cur := t.meters.Load(); cur != nil {
		next = make([]*meter, 0, len(*cur)+1)
		for _, x := range *cur {
			if x != m {
				next = append(next, x)
			}
		}
	}
	if add {
		next = append(next, m)
	}
	t.meters.Store(&next)
}

// metered is the metered streams' meters.
func (t *Tenant) metered() []*meter {
	if l := t.meters.Load(); l != nil {
		return *l
	}
	return nil
}

// Poll folds in the completed work of every metered stream. It allocates
// nothing: it runs before every admitted Do.
func (t *Tenant) Poll() error {
	if len(t.metered()) == 0 {
		return nil
	}
	return t.do(t.pollAll)
}

func (t *Tenant) pollAll(ctx cuda.Context) error {
	var err error
	for _, m := range t.metered() {
		if e := m.poll(ctx); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}
