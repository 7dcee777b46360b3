package fcsp

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/config"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/driverhook"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// Option configures Open. Options are made by this package's With
// functions; the zero Option is refused with ErrInvalidArgument.
type Option struct {
	apply func(*poolConfig) error // opaque: a caller sees the option, not the config it edits
}

// poolConfig is what Open's options chose, and their range checks
// (internal/config).
type poolConfig = config.Pool

// withDriver makes Open use a driver made by newDriver instead of loading
// libcuda: the simulator (package fcsptest, through internal/driverhook, and
// this package's own tests).
func withDriver(newDriver func() cuda.Driver, simulated bool) Option {
	return Option{func(c *poolConfig) error { c.NewDriver, c.Simulated = newDriver, simulated; return nil }}
}

// applierOf and tenantApplierOf give config.Apply an option's function
// (the options' fields are this package's).
func applierOf(o Option) func(*poolConfig) error               { return o.apply }
func tenantApplierOf(o TenantOption) func(*tenantConfig) error { return o.apply }

func init() {
	driverhook.WithDriver = func(newDriver func() cuda.Driver, simulated bool) any {
		return withDriver(newDriver, simulated)
	}
}

// WithPartitionUnit sets the size of the groups tenant partitions are made
// of. The default is the device's granularity (8 SMs on Hopper), which
// allows the finest partitions; larger units can reach more of the device
// (on the H200 two 64-SM partitions need a unit of 64, since the driver makes
// at most 15 groups of 8).
func WithPartitionUnit(sms int) Option {
	return Option{func(c *poolConfig) error { return c.SetPartitionUnit(sms) }}
}

// WithPrewarm provisions partitions of these sizes at Open, so that
// NewTenant with a matching WithSMs takes one without touching the driver.
func WithPrewarm(sizes ...int) Option {
	return Option{func(c *poolConfig) error { return c.AddPrewarm(sizes) }}
}

// WithDRAMetadata opens the GPU a Kubernetes DRA claim gave the container:
// path is the claim's device metadata file, which the kubelet mounts into
// the container (KEP-5304; for a claim made from a ResourceClaimTemplate,
// /var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/<podClaimName>/<requestName>/<driverName>-metadata.json).
// Open reads the device's UUID there (the "uuid" attribute of NVIDIA's DRA
// driver) and opens the visible GPU that has it, so that the pool is on the
// device the scheduler allocated whatever its ordinal in the container;
// Open's index then counts the claim's devices (0: its first). A claimed
// device the process does not see fails with ErrDeviceNotVisible, naming
// the devices it sees; a file that cannot be read or names no device, with
// its reason. Without this option, the variable FCSP_DRA_METADATA in
// WithEnviron's environment names the file.
func WithDRAMetadata(path string) Option {
	return Option{func(c *poolConfig) error { return c.SetDRAFile(path) }}
}

// WithDeviceMemoryLimit caps the device memory the pool holds: what all
// tenants together allocate (PoolStats.MemoryUsed) and what the SDK's own
// objects hold (PoolStats.Overhead: green contexts, streams, modules). An
// allocation, or an object the SDK would make, that would pass it is
// refused with ErrQuotaExceeded; a Do that would make one more green
// context waits for those made instead. Memory that nothing counted (the
// primary context, a library's own workspace) is outside it unless
// WithUnaccountedHeadroom folds it in.
func WithDeviceMemoryLimit(bytes uint64) Option {
	return Option{func(c *poolConfig) error { return c.SetMemLimit(bytes) }}
}

// WithEnviron reads HAMi-core's variables (CUDA_DEVICE_MEMORY_LIMIT[_i],
// CUDA_DEVICE_SM_LIMIT[_i]) from environ (os.Environ() for the process's),
// so the SDK drops into pods that HAMi's device plugin configures: the
// memory limit caps the pool and the SM limit becomes every tenant's
// default rate limit.
//
// environ overlays the process's environment, it does not replace it: a
// variable environ sets is read from environ, any other from the process,
// for every variable the pool reads (HAMi-core's, CUDA_DEVICE_MAX_CONNECTIONS,
// and the MPS and LD_PRELOAD variables the caveats check reads), as if
// environ had been exported before Open. A variable set twice takes its
// first setting, as getenv does. The driver reads CUDA_DEVICE_MAX_CONNECTIONS
// from the process, so a value environ gives is exported there before the
// driver makes the device's context. Without WithEnviron (or with a nil
// environ) HAMi-core's variables are not read; the others are read from
// the process alone.
func WithEnviron(environ []string) Option {
	return Option{func(c *poolConfig) error { c.Environ = environ; return nil }}
}

// WithLogger sets where the pool logs lifecycle events (default: discard).
func WithLogger(l *slog.Logger) Option {
	return Option{func(c *poolConfig) error { c.Logger = l; return nil }}
}

// LimiterTuning holds the constants of the pool's limiters, which
// WithLimiterTuning sets: a zero field keeps its default.
type LimiterTuning struct {
	// RefillPeriod is the time in which a tenant limited to 100% may
	// launch its SMs' worth of threads (SMs x threads per SM) once
	// (default 1 ms). An SM limit f then admits f x that many threads per
	// period: for a kernel whose full wave runs one period, f of its full
	// throughput. A GPU share's bucket holds one period of GPU time.
	// WithTenantRefillPeriod overrides it for one tenant.
	RefillPeriod time.Duration
	// Dampening is the fraction (0, 1] of a kernel's computed cost that is
	// charged (default 0.9: slight under-throttling let streams overlap
	// better in the FCSP design's benchmarks).
	Dampening float64
	// ThrottlePenalty weighs the extra charge a rate-limited (non-NCCL)
	// launch pays: cost x (1 + w x (1 - SM limit)), so a tenant held far
	// below its SMs is slowed more than linearly (default 1).
	// NoThrottlePenalty turns it off, so that an SM limit f admits exactly
	// f of the full launch rate.
	ThrottlePenalty float64
}

// NoThrottlePenalty, as LimiterTuning.ThrottlePenalty, turns the throttle
// penalty off (the zero value keeps the default of 1).
const NoThrottlePenalty = tokenbucket.NoPenalty

// WithLimiterTuning sets the pool's limiter constants (WithSMLimit's
// launch-rate model, and the refill period of every bucket); fields left
// zero keep their defaults. A field out of range is ErrInvalidArgument.
func WithLimiterTuning(t LimiterTuning) Option {
	return Option{func(c *poolConfig) error { return c.SetTuning(t.RefillPeriod, t.Dampening, t.ThrottlePenalty) }}
}

// TenantOption configures NewTenant. Options are made by this package's
// With functions; the zero TenantOption is refused with ErrInvalidArgument.
type TenantOption struct {
	apply func(*tenantConfig) error
}

// tenantConfig is what NewTenant's options chose, their range checks and
// the rules between them (internal/config).
type tenantConfig = config.Tenant

// WithMemoryPool sets how much the tenant's stream-ordered memory pool
// keeps. Every tenant has such a pool unless made WithoutMemoryPool
// (cuMemPoolCreate) with free lists in front of it: a block freed on a
// stream is kept for the next allocation of its size class on that stream,
// which then costs no driver call (stream order makes the reuse safe).
// Sizes are rounded up to classes, at most 1/8 larger, as the pool holds
// them; the quota counts what was asked for. The pool's maximum size is the
// quota, which the driver rounds up to whole chunks (32 MiB on the H200);
// blocks in use, cached and the gaps between them must fit in it, and a
// request that does not is refused with ErrQuotaExceeded. Cached bytes
// count in the tenant's MemGetInfo. keep bounds each stream's free lists
// and is how much the driver's pool keeps across a synchronisation (0: up
// to the quota). Trim gives cached memory back; an allocation that finds
// the pool or the device full trims the tenant's own cache, then its
// neighbours', before it fails.
func WithMemoryPool(keep uint64) TenantOption {
	return TenantOption{func(c *tenantConfig) error { c.Plain, c.Keep = false, keep; return nil }}
}

// WithConcurrentDos sets how many of a partitioned tenant's Dos may run at
// once (default 16): each holds a green context of its own over the
// tenant's SMs, made on first need (about 1.2 ms on the H200), since the
// driver lets a green context be current on one thread at a time. Past n,
// Dos wait in arrival order. 1 serialises them. Each green context holds
// 4 MiB of device memory until the pool closes, n per size the tenant
// takes (WithGreenContextLimit says how many a configuration makes).
func WithConcurrentDos(n int) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetConcurrentDos(n) }}
}

// WithoutMemoryPool makes Alloc and Free call cuMemAlloc and cuMemFree.
// cuMemFree waits for the whole device (on the H200 a 1 MiB Alloc+Free
// took 50.7 ms beside a 50 ms kernel of another partition's): only for
// code that needs memory usable on any stream at once without ordering.
func WithoutMemoryPool() TenantOption {
	return TenantOption{func(c *tenantConfig) error { c.Plain = true; return nil }}
}

// WithContext ties the tenant to ctx: when ctx is done the tenant is closed
// and everything it held returns to the pool (a request-scoped tenant, or a
// class that ends with its server's context).
func WithContext(ctx context.Context) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetContext(ctx) }}
}

// WithSMs gives the tenant a partition of n SMs of its own; n must be a
// multiple of the pool's partition unit.
func WithSMs(n int) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetSMs(n) }}
}

// WithRestOfSMs gives the tenant every group no other tenant holds.
func WithRestOfSMs() TenantOption {
	return TenantOption{func(c *tenantConfig) error { c.Rest = true; return nil }}
}

// WithMemoryQuota limits what the tenant may have allocated at once, in
// bytes: an allocation past it fails with ErrQuotaExceeded. A quota of 0,
// or above the device's limit (its memory, WithDeviceMemoryLimit or
// HAMi's CUDA_DEVICE_MEMORY_LIMIT), is refused at NewTenant with
// ErrInvalidArgument naming that limit. Quotas are not reserved: the
// tenants' quotas together may pass the device's limit, which bounds what
// they hold together (an allocation that would pass it fails with
// ErrQuotaExceeded whatever the tenant's own quota leaves). Without the
// option a tenant's quota is the device's limit.
func WithMemoryQuota(bytes uint64) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetQuota(bytes) }}
}

// WithSMLimit limits the tenant's kernel launch rate to fraction f of what
// its SMs can take (0 < f <= 1).
func WithSMLimit(f float64) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetSMLimit(f) }}
}

// WithStreamClass sets the class of the tenant's first stream.
func WithStreamClass(cl Class) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetClass(cl) }}
}

// WithHostWait sets how Synchronize waits for a stream's work. By default
// the wait adapts. A stream whose waits have averaged past a millisecond (a
// batch class's GEMMs) sleeps on a blocking-sync event while Go's scheduler
// is busy, rather than spinning a core the server's other goroutines need
// (H200, docs/BENCHMARKS.md run CC: 4 requests a class under a server's
// storm of calls, P99 1.08x its quiet figure against 2.02x spinning). Other
// waits, while at most half of GOMAXPROCS (the host's cores, or a
// container's CPU limit) of the process's goroutines wait, are the
// driver's (cuStreamSynchronize spins the calling thread, the lowest
// latency with a core to spare); past that, they poll from Go and yield
// after 50 µs, so that waiters outnumbering cores share them through Go's
// scheduler rather than being descheduled by the kernel for milliseconds.
// SpinInDriver always waits in the driver; a spin of 0 or more always
// polls, yielding after spin. Measured on the H200 host (docs/BENCHMARKS.md,
// runs P and R): one waiter, the driver's and a polled wait alike (K=1 P99
// 61 and 59 µs); 16 request goroutines beside 16 batch ones, P99/P50 42 in
// the driver and 1.65 polled; under a storm of 32 goroutines calling Stats,
// a yielding waiter queues behind them (P99 148-193 µs against 91 in the
// driver).
func WithHostWait(spin time.Duration) Option {
	return Option{func(c *poolConfig) error { return c.SetHostWait(spin) }}
}

// WithoutCoscheduling cuts the device with
// CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, which reaches more of the
// device: on the H200 a split by 8 makes 16 groups of 8 and leaves 4 SMs
// instead of 15 groups and 12. The cost: the driver no longer promises that
// a group's SMs can be co-scheduled, so a kernel launched with thread-block
// clusters may not fit in a partition (or may run fewer clusters at once);
// ordinary kernels are unaffected. See docs/BENCHMARKS.md for what was
// measured on the H200 (TestGPUWithoutCoscheduling).
func WithoutCoscheduling() Option {
	return Option{func(c *poolConfig) error { c.SplitFlag |= cuda.SplitIgnoreCoscheduling; return nil }}
}

// WithSMShare gives the tenant a partition of about fraction f of the
// device's SMs (0 < f <= 1): the legal size nearest f x SMs, a whole number
// of partition units between one unit and every group the split made. The
// tenant's SMs and Stats.SMShare say what was picked, and the pool logs it.
func WithSMShare(f float64) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetSMShare(f) }}
}

// WithRemainderSMs gives the tenant the SMs that the pool's split leaves
// over, which no group holds (12 on the H200 split by 8; 4 with
// WithoutCoscheduling): small, but otherwise idle. A WithRestOfSMs tenant
// made while the remainder is free includes it.
func WithRemainderSMs() TenantOption {
	return TenantOption{func(c *tenantConfig) error { c.Shape.Remainder = true; return nil }}
}

// WithPriority sets the tenant's priority. LatencyCritical meters the
// tenant's GPU time (its launches' events tell when it has work in flight).
func WithPriority(p Priority) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetPriority(config.Priority(p)) }}
}

// WithBandwidthFloor makes the tenant yield to the pool's LatencyCritical
// tenants: while one of them has kernels in flight, this tenant's launches
// are admitted at f (0 < f <= 1) of its GPU share, and at its full share
// again once they are idle. Each launch is charged 1/f of its predicted GPU
// time meanwhile; the surcharge is charged on the prediction and not
// corrected when the launch is measured.
//
// The floor acts on a GPU-time bucket: with WithGPUShare(s) the tenant gets
// f x s of the device's time while the latency tenant is busy; without it,
// the tenant gets a share of 1, which (as WithGPUShare(1)) costs nothing
// while no latency tenant is busy. WithSMLimit's launch-rate model cannot
// be floored (ErrInvalidArgument).
//
// What the floor holds back is admission: kernels already queued on the
// GPU when the latency tenant starts run to their end, and the tenant may
// still launch what its bucket holds at that moment (one refill period x
// its share: WithTenantRefillPeriod bounds it). Keep a floored tenant's
// kernels short and its queue shallow for the floor to take hold quickly.
// A launch waiting at the floor when the latency tenants are seen idle
// (by their own poll or Synchronize) is woken and admitted at the full
// share.
func WithBandwidthFloor(f float64) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetFloor(f) }}
}

// WithReshapeSizes lets the tenant change its SM count at run time
// (Tenant.Reshape) between the sizes given and the one it starts with
// (WithSMs, WithSMShare or WithRestOfSMs). A green context for each size is
// built at NewTenant, from groups next to the tenant's own, so that a
// reshape on the request path costs an event and a wait per stream, not a
// green context. A WithRestOfSMs tenant's sizes include the split's
// remainder if it got it, and it shrinks away from the groups the tenants
// made before it grow into: made in that order, an interactive tenant
// WithSMs(8), WithReshapeSizes(32) and a batch tenant WithRestOfSMs(),
// WithReshapeSizes(100) on the H200 can trade 24 SMs (batch 124 <-> 100,
// interactive 8 <-> 32). A module is loaded once, with the primary context, and serves every layout.
func WithReshapeSizes(sms ...int) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.AddReshapeSizes(sms) }}
}

// WithLatencyTarget makes the tenant a latency class whose SMs follow its
// load: it starts on minSMs, and the pool's controller grows it up to
// maxSMs (both multiples of the pool's unit) while its requests in flight
// or their P99 ask for more (two requests or more over p99, their starts
// further apart than a request and 2 ms: one slow request, or the requests
// of one moment, is a stall of the host that SMs do not cure), taking the SMs from the tenant made
// WithRestOfSMs after it (the throughput class, which gets the sizes it
// needs for that by itself), and gives back what the load no longer asks
// for, in one move, once it has asked for less for 50 ms (15 ms where it
// asks for minSMs: the burst is over) and the P99 is within p99 (or no
// request is in flight). It takes no more than the target
// needs: while a full load's P99 is within 85% of p99 and would stay within
// p99 if it grew as the SMs fall (64 requests or more, none over, 50 ms
// after the last move), it gives a step back, and bursts
// after grow to that size; a P99 over p99 there takes the step again, and
// that size is tried again 1 s later, 2 s after a second failure, and so on
// up to 30 s. A
// request is what the SDK sees of it: a call of the tenant's (a Do, a
// Synchronize) under way, and its time a Synchronize of one of the
// tenant's streams. Moves are at least 2 ms apart, and none starts while
// the work queued before the last one still runs. Stats.SMMoves counts
// them and SMMoveReason says why the last was made. One latency class per
// pool; make it before the rest's tenant. DoEach, or WithWarmup at
// NewTenant, warms the contexts of every size it may take (telling each run
// its size through Current.SMs).
// As after any Reshape, a library bound to a stream handle must be bound
// again to the one Current.Stream gives in each Do, and told Current.SMs.
func WithLatencyTarget(p99 time.Duration, minSMs, maxSMs int) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetLatency(p99, minSMs, maxSMs) }}
}

// WithRelativeLatencyTarget is WithLatencyTarget with a target a server
// can state without knowing the card: factor (from 1 to 1000) times the
// class's own P99 at maxSMs under the heaviest load the controller has
// measured there. Until that is measured a burst takes maxSMs;
// Stats.LatencyTarget says the target once known (0 before).
func WithRelativeLatencyTarget(factor float64, minSMs, maxSMs int) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetRelativeLatency(factor, minSMs, maxSMs) }}
}

// WithQueueHorizon bounds, for the tenant made WithRestOfSMs beside a
// latency class, the GPU time it keeps queued ahead while the class may
// take its SMs: its next launch or Do is admitted once its queued work's
// estimated time (metered on the GPU: such a rest tenant is metered) is
// under d, so that a growth of the class waits for about the kernel
// already running on each SM it takes rather than the queue behind it.
// The default is 150 µs; NoQueueHorizon turns the bound off. What the
// rest gives up for it: its goroutines wait in admission instead of in
// Synchronize, and work it runs side by side on several streams is
// counted as queued one after another. Measured on an H100 (8192^3 GEMMs
// on two streams, no latency request; docs/BENCHMARKS.md, run J1): 98.6-98.8%
// of the rate without the bound at 150 µs, 96.9-97.7% at 50 µs. A shorter
// horizon makes a growth less likely to wait for a second kernel (it
// does where it comes in the horizon before the running one ends) and
// the GPU likelier to idle between the rest's kernels.
func WithQueueHorizon(d time.Duration) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetQueueHorizon(d) }}
}

// NoQueueHorizon is WithQueueHorizon's value for a rest tenant whose queue
// is never bounded.
const NoQueueHorizon time.Duration = -1 // internal/config's NoQueueHorizon

// WithWarmup gives the SDK the tenant's warm-up: f runs, as a Do's
// function would, in every context the tenant will serve a Do from, before
// that context serves one, so that a library's first use in a context
// (cuBLAS loads its kernels there, and a load waits for the whole device)
// and the context's making (1.2 ms on the H200) never fall on a request.
// For a partitioned tenant that is every context of every size it may take
// (WithConcurrentDos of each, all made at NewTenant; WithReshapeSizes' and
// WithLatencyTarget's sizes, and a rest tenant's that trades with a latency
// class), before NewTenant returns. For an unpartitioned tenant, whose Dos
// share the commons' contexts with the other unpartitioned tenants: the
// contexts of the SMs it has at NewTenant (as many as DoEach runs), those
// of the SMs the commons moves to (before the move lets its Dos run), and
// a context the commons makes on demand later, or that another tenant held
// meanwhile, in the Do that takes it first, before that Do's function.
//
// Current.SMs tells f the size of the context it runs in (a library sizes
// its kernels by it: cublasSetSmCountTarget). f runs on one thread, one
// context after another, not metered or admitted; it must not Close or
// Reshape the tenant (ErrInsideDo), nor make, close or reshape other
// tenants (a warm-up after a move of the commons runs while such changes
// wait for it). An error (or a panic) from f fails NewTenant with
// ErrWarmupFailed, wrapping f's error, and closes the tenant: its memory,
// SMs and name go back to the pool. Later, a failed run is logged and
// tried again by the next Do in that context, which returns its error.
// A nil f is ErrInvalidArgument.
func WithWarmup(f func(Current) error) TenantOption {
	return TenantOption{func(c *tenantConfig) error {
		if f == nil {
			return fmt.Errorf("%w: WithWarmup with a nil function", ErrInvalidArgument)
		}
		c.Warm = f
		return nil
	}}
}

// WithStallTimeout watches every tenant's streams for work that makes no
// progress for d: a kernel that never ends, a stream waiting for an event
// nobody records. Such a tenant is stalled: Health names it (which stream,
// since when, what was queued) and says RestartRequired, its Stats and the
// Prometheus collector say so, a warning is logged and the handler of
// WithStallHandler runs, once; its later calls return ErrStalled at once,
// and its Close returns at once, keeping what its stuck work may still
// use (its memory, its SMs) until the process exits. The other tenants
// keep serving: no move of SMs, lock or stream of theirs waits for it.
//
// Off by default: a stall is known only against a bound, and the right
// one is the server's. Choose d above the longest kernel, graph or library
// call a class runs plus the work it keeps queued in front of it (a batch
// class's queue of GEMMs, say), with room for the clock's slowdowns: work
// that runs longer than d is a stall. A watched stream costs one
// cuStreamQuery a tick (d/20, within 1 to 5 ms) and an event where it is
// busy; a stall is seen within d plus 10 ms of its work's start.
// WithTenantStallTimeout sets a tenant's own bound, or none.
func WithStallTimeout(d time.Duration) Option {
	return Option{func(c *poolConfig) error { return c.SetStall(d) }}
}

// WithStallHandler runs f once for each tenant found stalled
// (WithStallTimeout), on a goroutine of its own: a server's supervisor
// hook (drain, then replace the process at a time of its choosing). A nil
// f is ErrInvalidArgument.
func WithStallHandler(f func(StallReport)) Option {
	return Option{func(c *poolConfig) error {
		if f == nil {
			return fmt.Errorf("%w: WithStallHandler(nil); pass the function to run for a stalled tenant", ErrInvalidArgument)
		}
		c.OnStall = f
		return nil
	}}
}

// NoStallTimeout is WithTenantStallTimeout's value for a tenant that is
// never watched, whatever the pool's WithStallTimeout.
const NoStallTimeout time.Duration = -1 // internal/config's NoStall

// WithTenantStallTimeout sets the tenant's own stall bound
// (WithStallTimeout), in place of the pool's; NoStallTimeout: its streams
// are not watched (a class whose kernels may run for minutes).
func WithTenantStallTimeout(d time.Duration) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetStall(d) }}
}

// WithTenantRefillPeriod sets the tenant's own refill period, overriding
// the pool's (LimiterTuning.RefillPeriod) for its limit.
func WithTenantRefillPeriod(d time.Duration) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetRefill(d) }}
}

// WithGreenContextLimit bounds the green contexts the pool makes (n >= 1).
// Each holds 4 MiB of device memory (measured on an H100, driver 580) from
// its making until the pool closes, whether it is in use, kept by the
// process for reuse (up to 64 per device, shared by its pools) or
// destroyed: the driver gives it back only with the primary context. So
// the bound is on memory: n x 4 MiB, counted in PoolStats.Overhead and
// against the device limit. (Keeping fewer for reuse would save nothing,
// a destroyed one holding its memory as a kept one does: there is no
// option for it.)
//
// How many a configuration makes: a partitioned tenant, per size it may
// take (its own, WithReshapeSizes', WithLatencyTarget's range in partition
// units, and a WithRestOfSMs tenant's sizes that trade with a latency
// class), up to WithConcurrentDos (16 by default), made as Dos first need
// them, or all at NewTenant with WithWarmup. A latency class of 16-48 SMs
// (5 sizes of 8) with 16 Dos is 80 (320 MiB), and the rest class that
// trades with it as many again; unpartitioned tenants' Dos, while
// partitions exist, make up to 64 per set of free SMs (DoEach warms 16),
// each move of the commons to SMs not seen before one set more.
//
// Past n, what must make one more fails with ErrGreenContextLimit: a
// NewTenant (its warm-up included: the tenant is undone), a Reshape, a
// move of the commons; a Do waits for the green contexts its size has.
func WithGreenContextLimit(n int) Option {
	return Option{func(c *poolConfig) error { return c.SetGreenLimit(n) }}
}

// WithMemorySampling sets how often the pool reads the process's device
// memory as the device reports it (NVML's list of compute processes; the
// fake driver's figure on the simulator) into PoolStats.DeviceMemory,
// beside what the pool counted of it: every second by default on a GPU,
// never on the simulator unless asked. 0 turns it off. It samples on a
// goroutine of its own, not when Stats is read: NVML's process list is a
// call into the kernel driver, and Stats is polled. In a container NVML
// lists the host's pids, and the figure may be missing
// (DeviceMemory.Reason says so).
func WithMemorySampling(every time.Duration) Option {
	return Option{func(c *poolConfig) error { return c.SetSample(every) }}
}

// WithUnaccountedMemoryBound logs a warning (WithLogger) when the
// process's device memory that nothing counted (DeviceMemory.Unaccounted:
// the primary context and the driver's own, 534 MiB after a pool's Open
// on an H100, and what libraries allocate for themselves) passes bytes,
// once until it falls back below. It needs sampling (WithMemorySampling).
func WithUnaccountedMemoryBound(bytes uint64) Option {
	return Option{func(c *poolConfig) error { return c.SetUnaccounted(bytes) }}
}

// WithUnaccountedHeadroom counts the memory nothing counted
// (DeviceMemory.Unaccounted) against the device limit at every sample, so
// that an allocation is refused before the device is full rather than a
// library failing inside a Do: the process's device memory, as NVML sees
// it, then stays within WithDeviceMemoryLimit but for what libraries took
// since the last sample. It needs sampling (WithMemorySampling).
func WithUnaccountedHeadroom() Option {
	return Option{func(c *poolConfig) error { c.Headroom = true; return nil }}
}

// WithSharedRegion makes the pool one of several processes sharing the
// device's memory limit through a node-wide region (a file under /dev/shm,
// mapped and locked): every process's allocations count against one device
// total, and when a process dies (SIGKILL included) the survivors' reaper
// gives its usage back once its PID is gone or its heartbeat is older than
// the timeout. A region with a bad magic, version or size is refused.
// path must be absolute, in a folder that exists, without a NUL byte and
// within the OS's limits on paths and names; another is ErrInvalidArgument.
func WithSharedRegion(path string) Option {
	return Option{func(c *poolConfig) error { return c.SetRegion(path) }}
}

// WithForeignSharedRegion accepts a shared region file that another user
// owns, or that every user may write (containers of different users sharing
// /dev/shm). Without it such a file is refused with ErrUnsafeRegion: whoever
// can write the region can make every process refuse allocations or pass
// the device limit. A symbolic link is refused either way.
func WithForeignSharedRegion() Option {
	return Option{func(c *poolConfig) error { c.Foreign = true; return nil }}
}

// WithHeartbeat sets how often this process marks itself alive in the
// shared region (default 1 s; at least 1 ms) and after how long without a
// beat a process is reaped (default 5 s; longer than the beat).
func WithHeartbeat(every, timeout time.Duration) Option {
	return Option{func(c *poolConfig) error { return c.SetHeartbeat(every, timeout) }}
}

// WithGPUMetering measures the tenant's GPU time on the GPU clock (events
// around each launch), reported in Stats as GPUTime and GPUTimeByClass.
func WithGPUMetering() TenantOption {
	return TenantOption{func(c *tenantConfig) error { c.Metered = true; return nil }}
}

// WithGPUShare limits the tenant to fraction f (0 < f <= 1) of the
// device's time: its bucket holds one refill period of GPU time and refills
// at f. Each launch is charged its kernel's predicted run time (a running
// average of its measured durations for that launch shape; a first launch
// is charged one refill period), and the charge is corrected when the
// launch's events complete, so the share holds whatever the kernels' shapes.
// Stream classes keep their factors (NCCL free, attention 20% less, copies
// 50% less). It implies WithGPUMetering and replaces WithSMLimit's
// launch-rate model for the tenant; SetSMLimit changes the share. A share of
// 1 is no limit at all: its launches never wait, whatever their length.
func WithGPUShare(f float64) TenantOption {
	return TenantOption{func(c *tenantConfig) error { return c.SetGPUShare(f) }}
}
