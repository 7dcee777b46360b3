// Package fcspprom exports a pool's figures to Prometheus: a
// prometheus.Collector that reads fcsp.Pool.Stats at scrape time, so that
// launches and allocations pay nothing for them. It lives apart from fcsp
// so that the core does not import Prometheus.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(fcspprom.NewCollector(pool))
//
// # Cost of a scrape
//
// A scrape through a registry costs about 1 µs of CPU per series (building
// and checking each), some 90 µs for two tenants: nothing at Prometheus's
// pace, but a busy server's cores if something scrapes in a loop. Two
// bounds, each a promise about staleness:
//
//   - WithMaxAge(d) lets the collector hand out the metrics it built at most
//     d ago instead of reading the pool again (the default, 0, reads it at
//     every scrape);
//   - NewGatherer serves the pool's metric families, already gathered and
//     checked, at most its max age old (DefaultMaxAge unless WithMaxAge
//     says): a scrape then costs a clock read. Serve it beside your other
//     gatherers, for example with prometheus.Gatherers{prometheus.DefaultGatherer, g}
//     in promhttp.HandlerFor.
//
// With several pools (one per GPU) in one registry, label each collector's
// metrics with its GPU:
//
//	gpu := prometheus.Labels{"gpu": strconv.Itoa(pool.Device().Index)}
//	reg.MustRegister(fcspprom.NewCollector(pool, fcspprom.WithConstLabels(gpu)))
//
// # Labels
//
// A tenant is a request class, and every fcsp_tenant_* series names it
// with the label a server's own request series use for one: class (as
// examples/server's fcsp_server_* series do), so that the two join without
// relabelling. A GPU time series names its stream's class stream_class.
// The device is fcsp_device_info (its name, UUID, compute capability and
// whether it is simulated, as labels of a constant 1) and fcsp_device_sms.
//
// # Context waits
//
// fcsp_tenant_context_wait_seconds is a histogram (buckets fcsp.WaitBounds,
// from 10 µs to 100 ms) of how long calls waited for a partitioned
// tenant's contexts since it was made: unlike quantile gauges it adds up
// across tenants and replicas, e.g.
//
//	histogram_quantile(0.99, sum by (le, class) (rate(fcsp_tenant_context_wait_seconds_bucket[5m])))
//
// # Ratios
//
// Kernel launches and Do calls are counted apart, each against its own
// admissions: launches_throttled_total/launches_admitted_total is the
// fraction of kernel launches that waited for tokens, and
// do_throttled_total/do_admitted_total the fraction of rate-limited Do
// calls that did; both stay within 0..1.
//
// # Memory
//
// fcsp_tenant_memory_limit_bytes is a tenant's own quota: a tenant made
// without one has no such series, since the device's limit alone bounds
// it and that is the pool's series (a copy per tenant would add up to many
// times the device, and read as memory set aside).
//
// fcsp_pool_memory_used_bytes is what counts against the device limit: the
// tenants' allocations plus the freed pool blocks cached on their free lists
// (fcsp_pool_memory_cached_bytes). A tenant's fcsp_tenant_memory_used_bytes
// is its allocations only, what its quota bounds; its cached blocks are
// fcsp_tenant_memory_cached_bytes. So the pool's used bytes exceed the sum
// of the tenants' by the pool's cached bytes.
//
// # SMs that follow the load
//
// A latency class (fcsp.WithLatencyTarget) has fcsp_tenant_sm_moves_total,
// its controller's moves labelled by the rule that made each (reason:
// grow_load, grow_p99, shrink, trim), and fcsp_tenant_latency_target_seconds;
// fcsp_tenant_sms of it and of the rest tenant plot where the SMs are.
package fcspprom

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Collector collects one pool's metrics.
type Collector struct {
	pool  *fcsp.Pool
	err   error // NewCollector(nil): why it describes and collects nothing valid
	d     descs
	all   []*prometheus.Desc
	built cache[[]prometheus.Metric] // the metrics of the last read of the pool
}

// Option configures a Collector or a Gatherer. Options are made by this
// package's With functions; the zero Option is refused (the collector's
// registration, or the gatherer's Gather, fails with
// fcsp.ErrInvalidArgument naming it).
type Option struct {
	apply func(*options) // opaque: a caller sees the option, not what it sets
}

type options struct {
	constLabels prometheus.Labels
	maxAge      time.Duration
	maxAgeSet   bool
}

// DefaultMaxAge is how old a Gatherer's families may be when WithMaxAge
// does not say: well under any scrape interval, and it bounds what the
// SDK's figures cost at ten builds a second whatever the scrape rate.
const DefaultMaxAge = 100 * time.Millisecond

// WithMaxAge lets a scrape get figures up to d old, built by an earlier
// scrape, instead of reading the pool again; scrapes that find the figures
// older build them once between them (the others meanwhile get the older
// figures, if there are any, rather than wait). 0: every scrape reads the
// pool (the Collector's default; a Gatherer's is DefaultMaxAge). A
// negative d is taken as 0.
func WithMaxAge(d time.Duration) Option {
	return Option{func(o *options) { o.maxAge, o.maxAgeSet = max(d, 0), true }}
}

// WithConstLabels adds labels with fixed values to every metric of the
// collector: the pool's GPU (an index, a UUID, a node-local name), so that
// one registry holds the collectors of several pools. Each collector in a
// registry needs its own values; names must not be those the metrics use:
// "class", "stream_class", "reason", and fcsp_device_info's "name",
// "uuid", "compute_capability" and "simulated".
func WithConstLabels(l prometheus.Labels) Option {
	return Option{func(o *options) {
		o.constLabels = make(prometheus.Labels, len(l))
		for k, v := range l {
			o.constLabels[k] = v
		}
	}}
}

// NewCollector returns a collector of pool's figures. Register it once per
// pool; two pools in one registry need WithConstLabels telling them apart
// (or distinct registries, or a prometheus.WrapRegistererWith label).
//
// A nil pool makes a collector that a registry refuses: Register returns
// an error matching fcsp.ErrInvalidArgument (MustRegister panics with it),
// and a scrape of it, unchecked, fails with that error, where it once
// served no series without a word.
func NewCollector(pool *fcsp.Pool, opts ...Option) *Collector {
	c := newCollector(pool, opts)
	if pool == nil {
		c.err = fmt.Errorf("%w: fcspprom.NewCollector(nil): a nil pool; pass the *fcsp.Pool whose figures to collect", fcsp.ErrInvalidArgument)
	}
	return c
}

// apply applies opts to o; the zero Option is an error naming it.
func apply(o *options, opts []Option) error {
	for i, opt := range opts {
		if opt.apply == nil {
			return fmt.Errorf("%w: fcspprom option %d is the zero Option; make options with WithMaxAge or WithConstLabels", fcsp.ErrInvalidArgument, i+1)
		}
		opt.apply(o)
	}
	return nil
}

// newCollector is NewCollector without its check of pool (a nil one serves
// tests' snapshots).
func newCollector(pool *fcsp.Pool, opts []Option) *Collector {
	var o options
	err := apply(&o, opts)
	c := &Collector{pool: pool, err: err}
	c.all = c.d.init(o.constLabels)
	c.built.maxAge = o.maxAge
	c.built.build = func() ([]prometheus.Metric, error) {
		var ms []prometheus.Metric
		c.collect(func(m prometheus.Metric) { ms = append(ms, m) }, c.pool.Stats())
		return ms, nil
	}
	return c
}

// Gatherer serves one pool's metric families, gathered at most its max age
// ago (NewGatherer).
type Gatherer struct {
	err      error // NewGatherer(nil): what every Gather returns
	reg      *prometheus.Registry
	gathered cache[[]*dto.MetricFamily]
}

// NewGatherer returns a prometheus.Gatherer of pool's metrics (a Collector
// with opts in a registry of its own), which keeps what it gathered for
// DefaultMaxAge, or WithMaxAge's d. The families it returns are shared by
// the scrapes of that time: encode or merge them (promhttp,
// prometheus.Gatherers do), do not modify them. A nil pool's Gather fails
// with NewCollector's error.
func NewGatherer(pool *fcsp.Pool, opts ...Option) *Gatherer {
	var o options
	if err := apply(&o, opts); err != nil {
		return &Gatherer{err: err}
	}
	if !o.maxAgeSet {
		o.maxAge = DefaultMaxAge
	}
	g := &Gatherer{reg: prometheus.NewRegistry()}
	// The collector reads the pool at each of the gatherer's builds: the
	// gatherer's cache is the only one.
	if g.err = g.reg.Register(NewCollector(pool, append(opts, WithMaxAge(0))...)); g.err != nil {
		return g // a nil pool, or const labels a registry refuses
	}
	g.gathered.maxAge = o.maxAge
	g.gathered.build = g.reg.Gather
	return g
}

// Gather implements prometheus.Gatherer.
func (g *Gatherer) Gather() ([]*dto.MetricFamily, error) {
	if g.err != nil {
		return nil, g.err
	}
	return g.gathered.get()
}

// cache holds what build made for maxAge. One caller at a time builds;
// while one does, the others take what was built before, or wait for the
// first build.
type cache[T any] struct {
	maxAge time.Duration
	build  func() (T, error)
	last   atomic.Pointer[built[T]]
	mu     sync.Mutex // held by the caller building
}

type built[T any] struct {
	at time.Time
	v  T
}

func (c *cache[T]) get() (T, error) {
	if c.maxAge <= 0 {
		return c.build()
	}
	b := c.last.Load()
	if b != nil && time.Since(b.at) < c.maxAge {
		return b.v, nil
	}
	if !c.mu.TryLock() {
		if b != nil {
			return b.v, nil // another caller is building: the last figures meanwhile
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if b := c.last.Load(); b != nil && time.Since(b.at) < c.maxAge {
		return b.v, nil // built while this caller waited
	}
	at := time.Now()
	v, err := c.build()
	if err != nil {
		return v, err // not kept: the next scrape tries again
	}
	c.last.Store(&built[T]{at: at, v: v})
	return v, nil
}

// descs are a collector's metric descriptions, made with its const labels.
type descs struct {
	sms, part, memUsed, memLimit, memCache, smLimit, share    *prometheus.Desc
	launches, throttle, wait, doAdmitted, doThrottle, doWait  *prometheus.Desc
	gpu, streams                                              *prometheus.Desc
	ctxWait, ctxWaits, device, deviceSMs                      *prometheus.Desc
	poolUsed, poolCached, poolLim, poolFree, tenants          *prometheus.Desc
	lost, stalled, stalls, restart                            *prometheus.Desc
	moves, latTarget, moveTime, recovery                      *prometheus.Desc
	bandwidth, slowdown, bytes, latency, floor, floored, busy *prometheus.Desc
	mem                                                       memDescs // memory.go
}

func (d *descs) init(cl prometheus.Labels) []*prometheus.Desc {
	var all []*prometheus.Desc
	mk := func(name, help string, labels ...string) *prometheus.Desc {
		desc := prometheus.NewDesc(name, help, labels, cl)
		all = append(all, desc)
		return desc
	}
	// A tenant is a request class: its series carry the label the
	// server's own use for one, class.
	const t = "class"
	d.sms = mk("fcsp_tenant_sms", "SMs the tenant runs on (unpartitioned: those no partition holds, shared; the whole device while no partition exists).", t)
	d.part = mk("fcsp_tenant_partitioned", "1 if the tenant has SMs of its own (a green context).", t)
	d.memUsed = mk("fcsp_tenant_memory_used_bytes", "Device memory the tenant's live allocations hold: what its quota bounds. Freed blocks it keeps cached are not in it (fcsp_tenant_memory_cached_bytes).", t)
	d.memLimit = mk("fcsp_tenant_memory_limit_bytes", "The tenant's memory quota (WithMemoryQuota); absent for a tenant without one, which the device's limit alone bounds (fcsp_pool_memory_limit_bytes).", t)
	d.memCache = mk("fcsp_tenant_memory_cached_bytes", "Freed pool blocks kept on the tenant's free lists (WithMemoryPool): device memory counted in fcsp_pool_memory_used_bytes and against the device limit, not in the tenant's used bytes or quota.", t)
	d.smLimit = mk("fcsp_tenant_sm_limit_ratio", "WithSMLimit: the tenant's launch-rate limit as a fraction of what its own SMs (fcsp_tenant_sms) can take; 0: none. A WithGPUShare tenant's limit is fcsp_tenant_gpu_share_ratio.", t)
	d.share = mk("fcsp_tenant_gpu_share_ratio", "WithGPUShare: the fraction of the device's time the tenant's kernels and Do calls may use; 0: none.", t)
	d.launches = mk("fcsp_tenant_launches_admitted_total", "Kernel launches admitted. Do calls are counted apart (fcsp_tenant_do_admitted_total).", t)
	d.throttle = mk("fcsp_tenant_launches_throttled_total", "Of the kernel launches admitted, those that had to wait for tokens: over fcsp_tenant_launches_admitted_total, the fraction throttled.", t)
	d.wait = mk("fcsp_tenant_throttle_wait_seconds_total", "Time kernel launches spent waiting for tokens (Do's: fcsp_tenant_do_throttle_wait_seconds_total).", t)
	d.doAdmitted = mk("fcsp_tenant_do_admitted_total", "Do calls admitted by the tenant's GPU-share bucket (WithGPUShare below 1, or with a bandwidth floor; other Do calls are not rate-limited and not counted).", t)
	d.doThrottle = mk("fcsp_tenant_do_throttled_total", "Of the Do calls admitted, those that had to wait for tokens: over fcsp_tenant_do_admitted_total, the fraction throttled.", t)
	d.doWait = mk("fcsp_tenant_do_throttle_wait_seconds_total", "Time Do calls spent waiting for GPU-share tokens.", t)
	d.gpu = mk("fcsp_tenant_gpu_seconds_total", "Kernel time on the GPU clock of the tenant's completed launches, by stream class (WithGPUMetering or WithGPUShare; absent otherwise).", t, "stream_class")
	d.streams = mk("fcsp_tenant_streams", "Open streams of the tenant.", t)
	d.ctxWait = mk("fcsp_tenant_context_wait_seconds", "How long calls (Do, and driver calls that need the context current) waited for one of a partitioned tenant's contexts, since the tenant was made; calls that found one free count as 0.", t)
	d.ctxWaits = mk("fcsp_tenant_context_waits_total", "Calls that found none of the tenant's contexts free and waited (0 for an unpartitioned tenant, whose context never excludes); over fcsp_tenant_context_wait_seconds_count, the fraction that waited.", t)
	d.bandwidth = mk("fcsp_tenant_bandwidth_bytes_per_second", "Achieved memory bandwidth of the tenant's recent launches with declared bytes (Function.SetBytesMoved), on the GPU clock; absent until measured.", t)
	d.slowdown = mk("fcsp_tenant_slowdown_ratio", "Recent kernel durations over the best each kernel shape has run, weighted by GPU time (1: as fast as ever seen); absent until measured.", t)
	d.bytes = mk("fcsp_tenant_bytes_moved_total", "Declared bytes (Function.SetBytesMoved) of the tenant's completed launches.", t)
	d.latency = mk("fcsp_tenant_latency_critical", "1 if the tenant is WithPriority(fcsp.LatencyCritical).", t)
	d.floor = mk("fcsp_tenant_bandwidth_floor_ratio", "WithBandwidthFloor: the fraction of its GPU share the tenant keeps while a latency-critical tenant is busy; absent without a floor.", t)
	d.floored = mk("fcsp_tenant_floored_launches_total", "Launches admitted at the floor (a latency-critical tenant was busy); absent without a floor.", t)
	d.moves = mk("fcsp_tenant_sm_moves_total", "Moves of a latency class's SMs (WithLatencyTarget) by the pool's controller, by the rule that made each: grow_load (more requests in flight than its SMs were sized for), grow_p99 (its recent P99 over target, two requests or more over it, further apart than a host stall), shrink (the load asked for less for 50 ms, 15 ms for the floor once the burst is over, the P99 within target or nothing in flight), trim (a full load's P99 within 85% of target, and within it scaled to a step less: one step less for bursts). Only for a latency class; fcsp_tenant_sms says where its SMs and the rest tenant's are now.", t, "reason")
	d.moveTime = mk("fcsp_tenant_sm_move_seconds", "A latency class's SM moves' times, from the controller's decision to the new SMs serving (the wait for the work queued on them included); only for a latency class.", t)
	d.recovery = mk("fcsp_tenant_burst_recovery_seconds", "A latency class's bursts' times, from a burst's first request to the P99 of its requests back within target; only for a latency class.", t)
	d.latTarget = mk("fcsp_tenant_latency_target_seconds", "WithLatencyTarget: the P99 the latency class's controller holds its requests to; only for a latency class.", t)
	d.poolUsed = mk("fcsp_pool_memory_used_bytes", "Device memory counted against the device limit: the tenants' allocations plus the freed pool blocks cached on their free lists (fcsp_pool_memory_cached_bytes), so it exceeds the sum of fcsp_tenant_memory_used_bytes by those; under WithSharedRegion, every process's on the node.")
	d.poolCached = mk("fcsp_pool_memory_cached_bytes", "Freed pool blocks cached on all tenants' free lists: in fcsp_pool_memory_used_bytes, in no tenant's fcsp_tenant_memory_used_bytes.")
	d.poolLim = mk("fcsp_pool_memory_limit_bytes", "The device's memory limit (its memory, WithDeviceMemoryLimit or CUDA_DEVICE_MEMORY_LIMIT).")
	d.poolFree = mk("fcsp_pool_free_sms", "SMs not yet given to a partition.")
	d.tenants = mk("fcsp_pool_tenants", "Live tenants.")
	d.lost = mk("fcsp_pool_device_lost", "1 while a sticky device error has every tenant failing (until the process restarts).")
	d.stalled = mk("fcsp_tenant_stalled", "1 once the tenant's work made no progress for its stall timeout (WithStallTimeout): its calls are refused; its stuck work holds its SMs and memory until the process exits.", t)
	d.stalls = mk("fcsp_pool_stalled_tenants", "Tenants found stalled since the pool opened, closed or not (Health.Stalled).")
	d.restart = mk("fcsp_pool_restart_required", "1 once the process should be replaced (Health.RestartRequired): the device is lost, or a tenant stalled (the other tenants serve on).")
	d.busy = mk("fcsp_pool_latency_busy", "1 while a latency-critical tenant has kernels in flight, as last seen.")
	d.device = mk("fcsp_device_info", "The pool's GPU: 1, with its name, UUID, compute capability and whether it is the simulator as labels.", "name", "uuid", "compute_capability", "simulated")
	d.deviceSMs = mk("fcsp_device_sms", "The pool's GPU's SMs, as its driver reports them.")
	d.mem.init(mk)
	return all
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.err != nil {
		ch <- prometheus.NewInvalidDesc(c.err) // the registry refuses the collector
		return
	}
	for _, d := range c.all {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.err != nil { // unchecked, it got past its registration: the scrape fails, and says why
		ch <- prometheus.NewInvalidMetric(prometheus.NewInvalidDesc(c.err), c.err)
		return
	}
	if c.built.maxAge <= 0 {
		c.collect(func(m prometheus.Metric) { ch <- m }, c.pool.Stats())
		return
	}
	ms, _ := c.built.get()
	for _, m := range ms {
		ch <- m
	}
}

// collect sends the metrics of one snapshot (apart from the pool, for tests).
func (c *Collector) collect(emit func(prometheus.Metric), ps fcsp.PoolStats) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		emit(prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...))
	}
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		emit(prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...))
	}
	// histogram emits a cumulative histogram whose le[i] counts the
	// observations at most bounds[i] (fcsp's WaitBounds, MoveBounds).
	histogram := func(d *prometheus.Desc, bounds *[12]time.Duration, le [12]uint64, count uint64, total time.Duration, l ...string) {
		buckets := make(map[float64]uint64, len(le))
		for i, n := range le {
			buckets[bounds[i].Seconds()] = n
		}
		emit(prometheus.MustNewConstHistogram(d, count, total.Seconds(), buckets, l...))
	}
	d := &c.d
	var taken map[string]bool // the label values given, once a name needs mending
	for _, s := range ps.Tenants {
		// A label value must be UTF-8, and one that is not fails the
		// whole scrape (a panic the registry recovers, every tenant's
		// series lost): such a name (NewTenant refuses them) is shown
		// with its invalid bytes replaced, unless that name is taken.
		if !utf8.ValidString(s.Name) {
			if taken == nil {
				taken = validNames(ps.Tenants)
			}
			if s.Name = strings.ToValidUTF8(s.Name, "\uFFFD"); taken[s.Name] {
				continue
			}
			taken[s.Name] = true
		}
		gauge(d.sms, float64(s.SMs), s.Name)
		gauge(d.part, b2f(s.Partitioned), s.Name)
		gauge(d.memUsed, float64(s.MemoryUsed), s.Name)
		if s.MemoryLimit < ps.MemoryLimit {
			// A quota of its own: a tenant without one is bounded by the
			// device's limit alone, which is the pool's series, not its.
			gauge(d.memLimit, float64(s.MemoryLimit), s.Name)
		}
		gauge(d.memCache, float64(s.MemoryCached), s.Name)
		gauge(d.smLimit, s.SMLimit, s.Name)
		gauge(d.share, s.GPUShare, s.Name)
		// Stats.Throttled and ThrottleWait hold Do's waits too: the
		// launch series take them out, so each ratio has its own
		// denominator.
		counter(d.launches, float64(s.Launches), s.Name)
		counter(d.throttle, float64(s.Throttled-s.DoThrottled), s.Name)
		counter(d.wait, (s.ThrottleWait - s.DoThrottleWait).Seconds(), s.Name)
		counter(d.doAdmitted, float64(s.DoAdmitted), s.Name)
		counter(d.doThrottle, float64(s.DoThrottled), s.Name)
		counter(d.doWait, s.DoThrottleWait.Seconds(), s.Name)
		gauge(d.streams, float64(s.Streams), s.Name)
		gauge(d.stalled, b2f(s.Stalled != nil), s.Name)
		for class, t := range s.GPUTimeByClass {
			counter(d.gpu, t.Seconds(), s.Name, class.String())
		}
		cw := s.ContextWait
		histogram(d.ctxWait, &fcsp.WaitBounds, cw.Le, cw.Calls, cw.Total, s.Name)
		counter(d.ctxWaits, float64(cw.Waited), s.Name)
		bw := s.Bandwidth
		if bw.BytesPerSecond > 0 {
			gauge(d.bandwidth, bw.BytesPerSecond, s.Name)
		}
		if bw.Slowdown > 0 {
			gauge(d.slowdown, bw.Slowdown, s.Name)
		}
		counter(d.bytes, float64(bw.BytesMoved), s.Name)
		gauge(d.latency, b2f(bw.Priority == fcsp.LatencyCritical), s.Name)
		if bw.Floor > 0 {
			gauge(d.floor, bw.Floor, s.Name)
			counter(d.floored, float64(bw.FlooredLaunches), s.Name)
		}
		if s.LatencyTarget > 0 {
			gauge(d.latTarget, s.LatencyTarget.Seconds(), s.Name)
			counter(d.moves, float64(s.SMMovesBy.GrowLoad), s.Name, "grow_load")
			counter(d.moves, float64(s.SMMovesBy.GrowP99), s.Name, "grow_p99")
			counter(d.moves, float64(s.SMMovesBy.Shrink), s.Name, "shrink")
			counter(d.moves, float64(s.SMMovesBy.Trim), s.Name, "trim")
			histogram(d.moveTime, &fcsp.MoveBounds, s.SMMoveTime.Le, s.SMMoveTime.Count, s.SMMoveTime.Total, s.Name)
			histogram(d.recovery, &fcsp.MoveBounds, s.BurstRecovery.Le, s.BurstRecovery.Count, s.BurstRecovery.Total, s.Name)
		}
	}
	gauge(d.poolUsed, float64(ps.MemoryUsed))
	gauge(d.poolCached, float64(ps.MemoryCached))
	gauge(d.poolLim, float64(ps.MemoryLimit))
	gauge(d.poolFree, float64(ps.FreeSMs))
	gauge(d.tenants, float64(len(ps.Tenants)))
	gauge(d.lost, b2f(!ps.Health.Healthy()))
	gauge(d.stalls, float64(len(ps.Health.Stalled)))
	gauge(d.restart, b2f(ps.Health.RestartRequired))
	gauge(d.busy, b2f(ps.LatencyBusy))
	dev := ps.Device
	gauge(d.device, 1, strings.ToValidUTF8(dev.Name, "\uFFFD"), dev.UUID, dev.ComputeCapability, strconv.FormatBool(dev.Simulated))
	gauge(d.deviceSMs, float64(dev.SMs))
	d.mem.collect(gauge, ps)
}

// validNames is the set of the tenants' names that are valid UTF-8.
func validNames(ts []fcsp.Stats) map[string]bool {
	m := make(map[string]bool, len(ts))
	for _, s := range ts {
		if utf8.ValidString(s.Name) {
			m[s.Name] = true
		}
	}
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
