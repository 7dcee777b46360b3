package fcsp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/config"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/event"
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/hamienv"
	"github.com/fcsp-go/fcsp-go/internal/hostwait"
	"github.com/fcsp-go/fcsp-go/internal/nvml"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/memtrack"
	"github.com/fcsp-go/fcsp-go/stream"
)

// Pool is one GPU shared by tenants. It is safe for concurrent use.
type Pool struct {
	drv  cuda.Driver
	dev  *greenctx.Device
	info DeviceInfo
	cfg  poolConfig
	mem  *memtrack.Tracker
	log  *slog.Logger

	closeDone chan struct{} // closed when the first Close has finished
	raw       cuda.Driver   // the driver under the guard: only to put a thread's context back
	env       hamienv.Config

	// NCCL and other foreign streams, labelled by handle.
	registry stream.Registry

	shared   *shm.Member // nil without WithSharedRegion
	events   event.Set   // made by Pool.NewEvent
	unscoped unscopedProbe
	launcher place.Launcher    // kernel launches (launch.go), made at Open
	wait     hostwait.Wait     // Synchronize's HostWait, chosen at Open
	blocker  *hostwait.Blocker // the events of the waits that sleep
	memInfo  devmem.InfoCache  // MemGetInfo's device figures
	_        [128]byte
	fault    faultState // health.go, reset.go: read by every call, so on lines of its own
	_        [128]byte

	prio admission.Pool // latency tenants in flight (internal/admission)

	pools devmem.Peers // the tenants' memory engines, which trim each other (memory.go)

	mu      sync.Mutex
	split   *greenctx.Split // nil when noSplit says why
	noSplit error
	spare   *greenctx.Spares // provisioned, not yet owned (WithPrewarm)
	tenants map[string]*tenantCore
	closed  bool
}

// Open opens device index (0 for the first GPU). It loads the NVIDIA driver
// (tests and demos without a GPU open the simulator: fcsptest.SimulatedH200) and fails with ErrNoDriver where there is none.
// ctx bounds the time Open may take (provisioning partitions touches the
// driver).
func Open(ctx context.Context, index int, opts ...Option) (*Pool, error) {
	cfg := config.NewPool()
	if err := config.Apply(&cfg, "Open", opts); err != nil {
		return nil, err
	}
	if index < 0 {
		return nil, fmt.Errorf("%w: device index %d; want 0 or more", ErrInvalidArgument, index)
	}
	p := &Pool{cfg: cfg, tenants: map[string]*tenantCore{}, log: cfg.Logger, closeDone: make(chan struct{}), spare: greenctx.NewSpares(cfg.Prewarm)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler) // formats nothing: NewTenant logs on its fast path
	}
	if cfg.Environ != nil {
		env, err := hamienv.Parse(cfg.Environ)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
		p.env = env
	}
	// Before the driver makes the device's context, which reads it.
	queues, err := workQueues(cfg.Environ, cfg.NewDriver == nil)
	if err != nil {
		return nil, err
	}
	if cfg.NewDriver != nil {
		p.drv = cfg.NewDriver()
	} else {
		lib, err := cuda.Load()
		if err != nil {
			return nil, err
		}
		p.drv = lib
	}
	// Every call, greenctx's included, goes through the guard: whichever
	// call meets a sticky fault first turns the pool to lost.
	p.raw, p.drv = p.drv, cuda.NewGuard(p.drv, watch{p})
	if n, err := p.drv.DeviceCount(); err != nil {
		return nil, err
	} else if index >= n {
		return nil, fmt.Errorf("%w: device index %d; this machine has %d GPU(s)", ErrInvalidArgument, index, n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dev, err := greenctx.Open(p.drv, index)
	if err != nil {
		return nil, err
	}
	p.dev = dev
	p.blocker = hostwait.NewBlocker(p.drv, dev.Primary())
	switch {
	case !cfg.HostWaitSet:
		p.wait = hostwait.Adaptive(int32(max(runtime.GOMAXPROCS(0)/2, 1)), p.blocker) // the cores Go may use: a container's CPU limit
	case cfg.HostWait == SpinInDriver:
		p.wait = hostwait.Driver
	default:
		p.wait = hostwait.Poll(cfg.HostWait)
	}
	p.launcher = place.Launcher{Drv: p.drv, State: &p.unscoped.launch, Dev: dev, Log: p.log}
	fail := func(err error) (*Pool, error) { return nil, errors.Join(err, p.Close()) }
	if p.info, err = deviceInfo(index, dev); err != nil {
		return fail(err)
	}
	p.info.Simulated, p.info.WorkQueues = cfg.Simulated, queues
	limit := p.info.TotalMemory
	if cfg.MemLimit != 0 {
		limit = min(limit, cfg.MemLimit)
	}
	if b, ok := p.env.MemoryLimit(index); ok {
		limit = min(limit, b)
	}
	var mopts []memtrack.Option
	if cfg.Region != "" {
		o, err := p.joinRegion(index)
		if err != nil {
			return fail(err)
		}
		mopts = append(mopts, o)
	}
	if p.mem, err = memtrack.New(limit, mopts...); err != nil {
		return fail(err)
	}
	unit := cfg.Unit
	if unit == 0 {
		unit = dev.Granularity()
	}
	if unit > dev.SMs() {
		return fail(fmt.Errorf("%w: partition unit %d SMs; this device has %d SMs, cut in groups of %d", ErrInvalidArgument, unit, dev.SMs(), dev.Granularity()))
	}
	if p.split, err = dev.SplitWith(unit, cfg.SplitFlag); err != nil {
		if !errors.Is(err, cuda.ErrorInvalidResourceConfig) || cfg.Unit != 0 || len(cfg.Prewarm) > 0 {
			return fail(fmt.Errorf("cutting the device into groups of %d SMs: %w", unit, err))
		}
		// The driver will not split this context's SMs (seen on the H200
		// in an MPS client with an active-thread percentage): the pool
		// still serves unpartitioned tenants, and a partition request
		// says why it cannot be had.
		p.split, p.noSplit = nil, fmt.Errorf("%w: this device's SMs cannot be partitioned in this process (cutting into groups of %d SMs: %w); unpartitioned tenants work", ErrNotAvailable, unit, err)
		p.log.Warn("fcsp pool open without partitions", "device", p.info.String(), "why", err)
		return p, nil
	}
	if p.split.GroupSMs() != unit {
		return fail(fmt.Errorf("%w: partition unit %d SMs; this device splits in groups of %d (the driver rounded %d up to %d)",
			ErrGranularity, unit, dev.Granularity(), unit, p.split.GroupSMs()))
	}
	for _, s := range cfg.Prewarm {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		part, err := p.split.Take(s)
		if err != nil {
			return fail(fmt.Errorf("prewarming a %d-SM partition: %w", s, err))
		}
		p.spare.Add(part)
	}
	p.log.Info("fcsp pool open", "device", p.info.String(), "unit", unit,
		"groups", p.split.Groups(), "leftover_sms", p.split.Remainder(), "prewarmed", p.spare.Len())
	return p, nil
}

// Device describes the pool's GPU.
func (p *Pool) Device() DeviceInfo { return p.info }

// PartitionUnit is the size of the groups partitions are made of.
// 0 where the device cannot be partitioned in this process.
func (p *Pool) PartitionUnit() int {
	if p.split == nil {
		return 0
	}
	return p.split.GroupSMs()
}

// FreeSMs is how many SMs can still be given to partitioned tenants (the
// split's remainder included while no tenant holds it).
func (p *Pool) FreeSMs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.split == nil {
		return 0
	}
	return p.split.FreeSMs() + p.spare.SMs()
}

// SplitTable says what the driver would make for each minimum count
// (predicted, from the simulated split that performs nothing) and what it
// made when asked (measured). Nothing is provisioned.
func (p *Pool) SplitTable(minCounts ...int) (predicted, measured []SplitRow, err error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, nil, ErrClosed
	}
	pr, me, err := p.dev.Table(minCounts...)
	return splitRows(pr), splitRows(me), err
}

func splitRows(rows []greenctx.Row) []SplitRow {
	if rows == nil {
		return nil
	}
	out := make([]SplitRow, len(rows))
	for i, r := range rows {
		out[i] = SplitRow(r)
	}
	return out
}

// MemoryUsed is what all tenants hold, in bytes, including the freed
// blocks pooled tenants keep for reuse; MemoryLimit the cap.
// After Close it is 0.
func (p *Pool) MemoryUsed() uint64 {
	if p.shared != nil {
		return p.shared.Read(p.mem.Used) // the region may be unmapping
	}
	return p.mem.Used()
}

func (p *Pool) MemoryLimit() uint64 { return p.mem.Limit() }

// Tenants lists the live tenants' names, sorted.
func (p *Pool) Tenants() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.tenants))
	for n := range p.tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// RegisterStream labels a stream the SDK did not create (the stream an NCCL
// communicator runs on, say) so that Tenant.Adopt classifies it; call it
// where the communicator is made.
func (p *Pool) RegisterStream(handle uintptr, c Class) { p.registry.Register(handle, c) }

// UnregisterStream forgets a label (handles are reused once destroyed).
func (p *Pool) UnregisterStream(handle uintptr) { p.registry.Unregister(handle) }

// Close closes every tenant, releases spare partitions and the device. It
// is idempotent.
func (p *Pool) Close() error {
	if err := p.checkNotInsideDo("Pool.Close"); err != nil {
		return err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.closeDone // a close under way (a Shutdown's, say) finishes first
		return nil
	}
	p.closed = true
	defer close(p.closeDone)
	cores := make([]*tenantCore, 0, len(p.tenants))
	for _, c := range p.tenants {
		cores = append(cores, c)
	}
	spare := p.spare
	p.spare = greenctx.NewSpares(nil) // a closed pool keeps none
	p.mu.Unlock()
	var errs []error
	for _, c := range cores {
		errs = append(errs, c.close("pool closed"))
	}
	errs = append(errs, spare.Close())
	if p.dev != nil {
		errs = append(errs, p.events.Close(p.drv, p.dev.Primary()), p.pools.Close(p.drv, p.dev.Primary()), p.blocker.Close())
	}
	if p.mem != nil {
		// Before the region goes: the tracker then never reads it again
		// (a scrape racing this Close reads zeros, not an unmapped page).
		// The tenants closed above gave everything back; what is left is a
		// bug, reported.
		if leaked, err := p.mem.Close(); err != nil || leaked != 0 {
			errs = append(errs, err)
			if leaked != 0 {
				errs = append(errs, fmt.Errorf("fcsp: %d bytes still counted after every tenant closed", leaked))
			}
		}
	}
	errs = append(errs, p.shared.Close())
	if p.dev != nil {
		errs = append(errs, p.dev.Close())
	}
	return p.forgive(errors.Join(errs...))
}

// takePartition finds or builds a partition for a tenant.
func (p *Pool) takePartition(cfg *tenantConfig) (*greenctx.Partition, error) {
	if p.noSplit != nil {
		return nil, p.noSplit
	}
	if err := p.resolveShape(cfg); err != nil {
		return nil, err
	}
	if len(cfg.Shape.Sizes) > 0 {
		return p.takeLayouts(cfg)
	}
	if cfg.Shape.Remainder {
		return p.split.TakeRemainder()
	}
	if cfg.Rest {
		_ = p.spare.Close() // first, so the rest really is everything free
		return p.split.TakeRest()
	}
	if s := p.spare.Take(cfg.SMs); s != nil {
		return s, nil
	}
	return p.split.Take(cfg.SMs)
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
	// every process on the device.
	MemoryTotal, MemoryUsed uint64
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
func (p *Pool) NVML() NVMLFacts {
	if p.info.Simulated {
		return NVMLFacts{Reason: "simulated device"}
	}
	return nvmlFacts(nvml.Query(p.info.UUID))
}

// checkNotInsideDo refuses, with ErrInsideDo, a call made from inside a Do
// of one of the pool's tenants that would wait for that Do to end.
func (p *Pool) checkNotInsideDo(what string) error {
	p.mu.Lock()
	cores := make([]*tenantCore, 0, len(p.tenants))
	for _, c := range p.tenants {
		cores = append(cores, c)
	}
	p.mu.Unlock()
	for _, c := range cores {
		if err := c.checkNotInsideDo(what); err != nil {
			return err
		}
	}
	return nil
}
