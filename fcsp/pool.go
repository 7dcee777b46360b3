package fcsp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/config"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/event"
	"github.com/fcsp-go/fcsp-go/internal/fault"
	"github.com/fcsp-go/fcsp-go/internal/hamienv"
	"github.com/fcsp-go/fcsp-go/internal/hostwait"
	"github.com/fcsp-go/fcsp-go/internal/memwatch"
	"github.com/fcsp-go/fcsp-go/internal/nvml"
	"github.com/fcsp-go/fcsp-go/internal/overhead"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/poolmem"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/internal/smmove"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/internal/smprobe"
	"github.com/fcsp-go/fcsp-go/internal/stall"
	"github.com/fcsp-go/fcsp-go/internal/teardown"
	"github.com/fcsp-go/fcsp-go/internal/tenancy"
	"github.com/fcsp-go/fcsp-go/memtrack"
	"github.com/fcsp-go/fcsp-go/stream"
)

// Pool is one GPU shared by tenants. It is safe for concurrent use.
type Pool struct {
	// set once before sharing: by Open, then only read.
	drv       cuda.Driver // the guarded driver: every call of the pool's meets the fault state
	raw       cuda.Driver // the driver under the guard: only to put a thread's context back
	dev       *smpart.Device
	info      DeviceInfo
	cfg       poolConfig
	env       hamienv.Config
	log       *slog.Logger
	mem       *memtrack.Tracker
	shared    *shm.Member       // nil without WithSharedRegion
	closeDone chan struct{}     // closed when the first Close has finished
	launcher  place.Launcher    // kernel launches (internal/streams)
	wait      hostwait.Wait     // Synchronize's HostWait
	blocker   *hostwait.Blocker // the events of the waits that sleep
	// whole is the whole device, shared through its primary context;
	// plain is every unpartitioned tenant's placement: the commons
	// (internal/smmove) where the device can be partitioned, else whole.
	// One value each, never changed, so that such a tenant made allocates
	// no placement.
	whole   placement
	plain   placement
	split   *smpart.Split   // nil when noSplit says why; its own lock guards which SMs are taken
	moves   *smmove.Engine  // who holds which SMs, and every move of them (internal/smmove)
	stalls  *stall.Watchdog // the tenants' streams watched for work that makes no progress (internal/stall)
	noSplit error

	// own lock: each safe for concurrent use on its own (a lock inside, or
	// atomics).
	registry stream.Registry  // NCCL and other foreign streams, labelled by handle
	events   event.Set        // made by Pool.NewEvent
	unscoped unscopedProbe    // what the driver takes with no context current (unscoped.go)
	probe    smprobe.Kernel   // ProbeSMs's kernel, loaded once (probe.go)
	memInfo  devmem.InfoCache // MemGetInfo's device figures
	over     overhead.Meter   // the SDK's own objects' memory, charged against mem (internal/overhead)
	watch    *memwatch.Watch  // the device's view of the process's memory, sampled (poolstats.go)
	_        [128]byte
	fault    fault.State // own lock: internal/fault, lost as a *DeviceLostError (health.go): read by every call, so on lines of its own
	_        [128]byte
	prio     admission.Pool // own lock: latency tenants in flight (internal/admission)
	pools    devmem.Peers   // own lock: the tenants' memory engines, which trim each other (memory.go)
	// own lock: tenants is the live tenants by name, the spare partitions
	// and whether the pool is closed, under the pool's lock (Roster.mu),
	// and how a tenant joins and leaves them (internal/tenancy).
	tenants *tenancy.Roster[*tenantCore]
}

// Open opens device index (0 for the first GPU). It loads the NVIDIA driver
// (tests and demos without a GPU open the simulator: fcsptest.SimulatedH200) and fails with ErrNoDriver where there is none.
// ctx bounds the time Open may take (provisioning partitions touches the
// driver). One pool hands out a device's SMs per process: Open of a device
// this process has open already (a pool, or a greenctx.Device) is
// ErrDeviceInUse, since a second split would hand the same SMs out again;
// share the first *Pool (it is safe for concurrent use), or Close it
// first.
func Open(ctx context.Context, index int, opts ...Option) (*Pool, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	cfg := config.NewPool()
	if err := config.Apply(&cfg, opts, applierOf); err != nil {
		return nil, err
	}
	if index < 0 {
		return nil, fmt.Errorf("%w: device index %d; want 0 or more", ErrInvalidArgument, index)
	}
	spare := smpart.NewSpares(cfg.Prewarm)
	p := &Pool{cfg: cfg, tenants: tenancy.New[*tenantCore](spare), log: cfg.Logger, closeDone: make(chan struct{})}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler) // formats nothing: NewTenant logs on its fast path
	}
	var err error
	if p.env, err = hamienv.ForPool(cfg.Environ); err != nil {
		return nil, err
	}
	// Before the driver makes the device's context, which reads it.
	queues, err := smpart.WorkQueues(cfg.Environ, cfg.NewDriver == nil)
	if err != nil {
		return nil, err
	}
	if p.drv, err = cfg.Driver(); err != nil {
		return nil, err
	}
	// Every call, internal/smpart's included, goes through the guard: whichever
	// call meets a sticky fault first turns the pool to lost.
	p.fault.Public, p.fault.Whose, p.fault.Log = lostError, p.whose, p.log
	guard := cuda.NewGuard(p.drv, &p.fault)
	p.over.SetGreenLimit(cfg.Greens)
	guard.SetMaker(&p.over) // and the objects the pool makes are counted (internal/overhead)
	p.raw, p.drv = p.drv, guard
	// The device (a DRA claim's: WithDRAMetadata), the process's one map
	// of its SMs, described.
	var desc smpart.Description
	if p.dev, desc, err = smpart.OpenPool(ctx, p.drv, smpart.PoolDevice{Index: index, DRA: cfg.DRAMetadata(), Simulated: cfg.Simulated,
		Queues: queues, Environ: cfg.Environ, Log: p.log}); err != nil {
		return nil, err
	}
	p.info = DeviceInfo(desc)
	p.blocker = hostwait.NewBlocker(p.drv, p.dev.Primary())
	p.wait = hostwait.For(cfg.HostWaitSet, cfg.HostWait == SpinInDriver, cfg.HostWait, p.blocker)
	p.launcher = place.Launcher{Drv: p.drv, Probe: &p.unscoped.launch, Dev: p.dev, Log: p.log}
	fail := func(err error) (*Pool, error) { return nil, errors.Join(err, p.Close()) }
	p.whole = placement{place.Whole{Dev: p.dev, N: p.info.SMs}}
	if p.mem, p.shared, err = poolmem.Tracker(&p.cfg, p.env, p.info.Index, p.info.TotalMemory, &p.over, p.log); err != nil {
		return fail(err)
	}
	p.split, p.noSplit, err = smpart.Cut(ctx, p.dev, smpart.CutConfig{Unit: cfg.Unit, Flags: cfg.SplitFlag, Prewarm: cfg.Prewarm,
		Spare: spare, Log: p.log, Device: p.info.String()})
	if err != nil {
		return fail(err)
	}
	p.info.PartitionUnit = p.split.GroupSMs() // a split's groups keep their size
	if p.moves, err = smmove.New(smmove.Config{Dev: p.dev, Split: p.split, Log: p.log}); err != nil {
		return fail(err)
	}
	p.plain = placement{p.moves.Plain()}
	var onStall func(stall.Report)
	if f, ok := cfg.OnStall.(func(StallReport)); ok {
		onStall = func(r stall.Report) { f(StallReport(r)) }
	}
	p.stalls = stall.New(p.drv, p.dev.Primary(), p.log, onStall)
	p.tenants.Use(tenancy.Config{Moves: p.moves, Split: p.split, NoSplit: p.noSplit, Fault: &p.fault, Stalls: p.stalls, Stall: cfg.Stall,
		WorkQueues: p.info.WorkQueues, Resolve: p.resolveShape, Log: p.log})
	if p.watch, err = poolmem.Watch(&p.cfg, poolmem.Sampling{Drv: p.drv, UUID: p.info.UUID, Simulated: p.info.Simulated, Tracker: p.mem,
		Counted: p.counted, Log: p.log, Done: p.closeDone}); err != nil {
		return fail(err)
	}
	return p, nil
}

// Device describes the pool's GPU.
func (p *Pool) Device() DeviceInfo { return p.info }

// SplitTable says what the driver would make for each minimum count
// (predicted, from the simulated split that performs nothing) and what it
// made when asked (measured), with the split flags the pool cuts with
// (WithoutCoscheduling's). Nothing is provisioned.
func (p *Pool) SplitTable(minCounts ...int) (predicted, measured []SplitRow, err error) {
	if p.tenants.Closed() {
		return nil, nil, ErrClosed
	}
	return smpart.TableOfWith[SplitRow](p.dev, p.cfg.SplitFlag, minCounts...)
}

// MemoryUsed is what all tenants hold, in bytes, including the freed
// blocks pooled tenants keep for reuse; MemoryLimit the cap, which the
// SDK's own objects (PoolStats.Overhead) count against beside it.
// After Close it is 0.
func (p *Pool) MemoryUsed() uint64 {
	u := p.shared.Read(p.mem.Used) // with a shared region, which may be unmapping
	return u - min(u, p.over.Charged()+p.watch.Charged())
}

// MemoryLimit is the device memory limit the pool enforces: the device's
// total, or less where WithDeviceMemoryLimit (or HAMi's environment) set
// one. With WithSharedRegion it is the limit of every process together.
func (p *Pool) MemoryLimit() uint64 { return p.mem.Limit() }

// Tenants lists the live tenants' names, sorted.
func (p *Pool) Tenants() []string { return p.tenants.Names() }

// RegisterStream labels a stream the SDK did not create (the stream an NCCL
// communicator runs on, say) so that Tenant.Adopt classifies it; call it
// where the communicator is made. Handle 0 (the NULL stream, which is no
// communicator's) and a class that is not one of the Class constants are
// ErrInvalidArgument, and label nothing.
func (p *Pool) RegisterStream(handle uintptr, c Class) error {
	if handle == 0 {
		return fmt.Errorf("%w: RegisterStream of stream handle 0, the NULL stream; register the stream the communicator was made with", ErrInvalidArgument)
	}
	if err := checkClass(c); err != nil {
		return err
	}
	p.registry.Register(handle, c)
	return nil
}

// UnregisterStream forgets a label (handles are reused once destroyed).
func (p *Pool) UnregisterStream(handle uintptr) { p.registry.Unregister(handle) }

// Close closes every tenant, releases spare partitions and the device. It
// is idempotent.
func (p *Pool) Close() error {
	if err := p.checkNotInsideDo("Pool.Close"); err != nil {
		return err
	}
	cores, spare, first := p.tenants.Close()
	if !first {
		<-p.closeDone // a close under way (a Shutdown's, say) finishes first
		return nil
	}
	defer close(p.closeDone)
	// A NewTenant under way holds the move lock across its driver work,
	// made outside the pool's lock: it finishes first, and finds the pool
	// closed when it lists its tenant (undoing what it built), before
	// anything of the pool's goes.
	if p.moves != nil {
		p.moves.Barrier()
	}
	errs := make([]error, 0, len(cores)+2)
	if p.stalls != nil {
		errs = append(errs, p.stalls.Close()) // no look at a stream being closed
	}
	for _, c := range cores {
		errs = append(errs, c.fail("Pool.Close", c.close("pool closed")))
	}
	for _, r := range p.stalled() { // closed before (their own Close, the collector's): named all the same
		if !slices.ContainsFunc(cores, func(c *tenantCore) bool { return c.name == r.Tenant }) {
			errs = append(errs, tenantErr(r.Tenant, "Pool.Close", r.err()))
		}
	}
	errs = append(errs, teardown.Pool{Drv: p.drv, Dev: p.dev, Probe: &p.probe, Moves: p.moves, Spare: spare, Events: &p.events, Peers: &p.pools,
		Blocker: p.blocker, Mem: p.mem, Shared: p.shared}.Close())
	return p.fault.Forgive(errors.Join(errs...))
}

// NVMLFacts is what NVML reports about a GPU, sampled when asked. NVML sees
// the whole device, every process included; the pool's own figures are in
// Stats.
//
// Each fact is asked for on its own: one that NVML refuses (a board
// without power readings, a permission it lacks) is zero and named in
// Refused, and the others are still filled.
type NVMLFacts struct {
	// Available is false where NVML could not be used (no library, no
	// permission, the simulator); Reason then says why, and the other
	// fields are zero.
	Available bool
	Reason    string
	// Refused names each fact NVML refused, with its answer, e.g.
	// "power draw: ERROR_NOT_SUPPORTED"; those fields are zero.
	Refused []string
	// Name is the product name, e.g. "NVIDIA H200".
	Name string
	// MemoryTotal and MemoryUsed are bytes of device memory, MemoryUsed by
	// every process on the device; ProcessMemoryUsed this process's part
	// (0 where NVML does not list it: in a container NVML lists the
	// host's pids).
	MemoryTotal, MemoryUsed uint64
	ProcessMemoryUsed       uint64
	// GPUUtil is the percent of NVML's last sample period in which a kernel
	// ran on the device; MemUtil the percent in which memory was read or
	// written.
	GPUUtil, MemUtil uint32
	// Driver is the driver's version string, e.g. "580.159.04".
	Driver string
	// SMClockMHz is the SM clock now; SMClockMaxMHz the highest it runs at.
	// Throughput per SM scales with it: compare figures at one clock.
	SMClockMHz, SMClockMaxMHz uint32
	// PowerW is the board's power draw and PowerLimitW the limit enforced
	// now, in watts.
	PowerW, PowerLimitW float64
	// ClockReasons says why the clocks are below their maximum now, e.g.
	// ClockPowerCap while the board is held at PowerLimitW.
	ClockReasons ClockReasons
}

// NVML asks NVML for the device's name, memory, utilization, clocks and
// power now. Where NVML is absent (or on the simulator) the facts say why
// they are empty.
func (p *Pool) NVML() NVMLFacts { return nvmlFacts(nvml.QueryDevice(p.info.UUID, p.info.Simulated)) }

// checkNotInsideDo refuses, with ErrInsideDo, a call made from inside a Do
// of one of the pool's tenants that would wait for that Do to end; what
// names the call, and the error the tenant.
func (p *Pool) checkNotInsideDo(what string) error {
	for _, c := range p.tenants.List(nil) {
		if err := c.checkNotInsideDo(); err != nil {
			return c.fail(what, err)
		}
	}
	return nil
}
