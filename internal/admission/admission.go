// Package admission is fcsp's admission engine: what a launch, a graph
// launch, a Reservation or a metered Do passes before its work is queued.
// A tenant has one Tenant (its limiter, GPU-time accounts, Do meter and
// bandwidth floor), a stream one Gate, chosen when the stream is made: an
// unlimited, unmetered stream's gate admits everything at once; a limited
// one charges its token bucket; a metered one also times its work between
// two events and settles the charge with the measured cost.
//
// A caller checks its arguments, enters its life lock, asks its Gate for a
// Ticket (Admit, TryAdmit, or a Reservation's Wait), queues the work
// between the ticket's Begin and End, and the ticket settles itself: at
// once, or, for metered work, when its end event is seen complete. A
// ticket whose work never ran gives back what it took (Cancel, or End with
// the launch's error), as golang.org/x/time/rate's Reservation does.
//
// The package sees a stream only as its handle, class and events; it calls
// the driver through Events, which the pool's guarded driver implements
// (the fake driver drives the tests). It never imports fcsp.
package admission

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
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
	Floor       float64 // WithBandwidthFloor; 0: none

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

// Tenant is one tenant's admission state.
type Tenant struct {
	cfg      Config
	pool     *Pool
	limiter  *tokenbucket.Limiter // nil: not limited
	gpuShare bool

	gpu     [classes]atomic.Int64 // ns of completed work per class
	floored atomic.Uint64         // launches admitted at the floor
	bytes   atomic.Uint64         // declared bytes of completed launches
	dm      atomic.Pointer[doMeter]

	mu    sync.Mutex              // serialises changes of gates, and the Do meter's making
	gates atomic.Pointer[[]*Gate] // the metered streams' gates (copy on write: Poll takes no lock)
}

// NewTenant makes a tenant's admission from cfg.
//
// A plain cfg (Config.Plain) gets the pool's one plain engine rather than
// an engine of its own: it keeps nothing of its tenant, and a server that
// makes and closes tenants made 208 bytes of garbage with each.
func NewTenant(p *Pool, cfg Config) (*Tenant, error) {
	if cfg.Plain() {
		return p.plainEngine(cfg.Events), nil
	}
	t := &Tenant{cfg: cfg, pool: p, gpuShare: cfg.GPUShare > 0}
	var err error
	switch {
	case cfg.GPUShare > 0:
		// Tokens are nanoseconds of GPU time.
		refill := cfg.Refill
		if refill == 0 {
			refill = tokenbucket.DefaultRefillPeriod
		}
		t.limiter, err = tokenbucket.New(tokenbucket.Config{
			SMs: 1, ThreadsPerSM: int(refill.Nanoseconds()), SMLimit: cfg.GPUShare, RefillPeriod: refill,
			Dampening: 1, Penalty: tokenbucket.NoPenalty, Clock: cfg.Clock,
		})
	case cfg.SMLimit > 0:
		t.limiter, err = tokenbucket.New(tokenbucket.Config{
			SMs: cfg.SMs, ThreadsPerSM: cfg.ThreadsPerSM, SMLimit: cfg.SMLimit,
			Dampening: cfg.Dampening, Penalty: cfg.Penalty, RefillPeriod: cfg.Refill, Clock: cfg.Clock,
		})
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

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
	t := &Tenant{cfg: Config{Events: ev}, pool: pp}
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
func (t *Tenant) Limited() bool { return t.limiter != nil }

// SetSMLimit changes the limit (the share, under a GPU share); it applies
// from the next admission, and wakes the waiting ones to price again.
func (t *Tenant) SetSMLimit(f float64) error { return t.limiter.SetSMLimit(f) }

// SetSMs resizes a launch-rate limit to a reshaped tenant's SMs; a GPU
// share is of the device's time whatever the SMs.
func (t *Tenant) SetSMs(sms int) error {
	if t.limiter == nil || t.gpuShare {
		return nil
	}
	return t.limiter.SetSMs(sms)
}

// Capacity is the bucket's capacity (one refill period's tokens).
func (t *Tenant) Capacity() float64 { return t.limiter.Capacity() }

// Close closes the limiter: admissions waiting for tokens return ErrClosed.
func (t *Tenant) Close() {
	if t.limiter != nil {
		_ = t.limiter.Close()
	}
}

// closedErr maps the bucket's closing to the shared sentinel.
func closedErr(err error) error {
	if errors.Is(err, tokenbucket.ErrClosed) {
		return errs.ErrClosed
	}
	return err
}

// Stats is the admission's part of a tenant's Stats.
type Stats struct {
	SMLimit, GPUShare float64
	Throttled         uint64
	ThrottleWait      time.Duration
	DoAdmitted        uint64
	DoThrottled       uint64
	DoThrottleWait    time.Duration
	GPUTime           time.Duration
	GPUTimeByClass    map[stream.Class]time.Duration // nil: not metered
	Floored, Bytes    uint64                         // launches admitted at the floor; declared bytes completed
	BytesPerSecond    float64
	Slowdown          float64
}

// GateSums adds up a tenant's gates' figures for Stats: the caller walks
// its streams (under its own lock) and adds each stream's gate, with no
// copy of them; Stats is polled.
type GateSums struct {
	throttled uint64
	wait      time.Duration
	bw        bandwidthAccount
}

// AddTo adds g's figures to s.
func (g *Gate) AddTo(s *GateSums) {
	if g.bucket != nil {
		bs := g.bucket.Stats()
		s.throttled += bs.Throttled
		s.wait += time.Duration(bs.WaitNanos)
	}
	if m := g.meter; m != nil {
		m.mu.Lock()
		s.bw.weight += m.bw.weight
		s.bw.slowSum += m.bw.slowSum
		s.bw.byteNs += m.bw.byteNs
		s.bw.bytes += m.bw.bytes
		m.mu.Unlock()
	}
}

// Stats polls the metered streams and adds the sums of the tenant's gates.
func (t *Tenant) Stats(gates *GateSums) Stats {
	var s Stats
	if t.limiter != nil {
		if t.gpuShare {
			s.GPUShare = t.limiter.SMLimit()
		} else {
			s.SMLimit = t.limiter.SMLimit()
		}
	}
	if t.cfg.Metered {
		_ = t.Poll()
		s.GPUTimeByClass = make(map[stream.Class]time.Duration)
		for cl := range t.gpu {
			if ns := t.gpu[cl].Load(); ns != 0 {
				s.GPUTimeByClass[stream.Class(cl)] = time.Duration(ns)
				s.GPUTime += time.Duration(ns)
			}
		}
	}
	if dm := t.dm.Load(); dm != nil && dm.bucket != nil {
		bs := dm.bucket.Stats()
		s.DoAdmitted, s.DoThrottled, s.DoThrottleWait = bs.Admitted, bs.Throttled, time.Duration(bs.WaitNanos)
	}
	s.Throttled, s.ThrottleWait = s.DoThrottled+gates.throttled, s.DoThrottleWait+gates.wait
	s.Floored, s.Bytes = t.floored.Load(), t.bytes.Load()
	sum := gates.bw
	if sum.weight > 0 {
		s.Slowdown = sum.slowSum / sum.weight
	}
	if sum.byteNs > 0 {
		s.BytesPerSecond = sum.bytes / sum.byteNs * 1e9
	}
	return s
}
