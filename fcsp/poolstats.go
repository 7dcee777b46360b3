package fcsp

import (
	"slices"
	"strings"
	"time"
)

// WaitBounds are the upper bounds of WaitStats.Le's buckets, from a
// context taken at once to a queue behind long Dos.
var WaitBounds = [12]time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond,
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 100 * time.Millisecond,
}

// PoolStats is a snapshot of a pool: its device, its memory, and every live
// tenant's Stats, sorted by name.
type PoolStats struct {
	Device      DeviceInfo
	Health      Health // as Pool.Health reports it
	MemoryUsed  uint64 // bytes of device memory counted against MemoryLimit (under WithSharedRegion, every process's): plain tenants' allocations and what the tenants' pools map; the SDK's own objects (Overhead) count beside it
	MemoryOwn   uint64 // this process's part of MemoryUsed (all of it without WithSharedRegion), as counted when each tenant was read
	MemoryLimit uint64 // the device's limit: its memory, WithDeviceMemoryLimit or CUDA_DEVICE_MEMORY_LIMIT, whichever is smallest
	Tenants     []Stats
	// FreeSMs is how many SMs can still be given to partitioned tenants
	// (the split's remainder included while no tenant holds it).
	FreeSMs int
	// LatencyBusy reports whether a LatencyCritical tenant of the pool has
	// kernels in flight, as last seen (reading it asks the driver nothing).
	LatencyBusy bool

	// MemoryCached is the sum of the tenants' Stats.MemoryCached: freed
	// pool blocks kept on their free lists. They still hold device memory,
	// in their pools' chunks, so they count in MemoryUsed and against the
	// device limit, but in no tenant's MemoryUsed or quota.
	//
	// A tenant's pool (WithMemoryPool, the default) maps device memory a
	// chunk at a time (32 MiB on the H200) and keeps it mapped until a
	// trim: the device limit counts those chunks, which hold the tenant's
	// allocations, its cached blocks and the pool's free space, so
	// MemoryUsed is at least the tenants' MemoryUsed and MemoryCached,
	// and a tenant that allocated 1 MiB holds 32 MiB of it.
	MemoryCached uint64
	// Closed: the pool is closed (or closing); the figures are what was
	// left, and Tenants is empty once every tenant's close has finished.
	Closed bool

	// Overhead is the device memory the SDK's own objects hold. It counts
	// against MemoryLimit beside MemoryUsed: an allocation is refused where
	// the two would pass it, and so is an object the SDK would make.
	Overhead Overhead
	// DeviceMemory is the device's own view of the process's memory
	// (NVML's), sampled, beside what the pool counted of it then.
	DeviceMemory DeviceMemory
}

// Overhead is the device memory the SDK's own objects hold, by kind
// (PoolStats.Overhead). What each costs, as charged: a green context
// 4 MiB (measured on an H100, driver 580), from its making until the pool
// closes, destroyed, kept for reuse or in use (the driver keeps it while
// the primary context lives); a stream 512 KiB, a module its image rounded
// up to 2 MiB, an event nothing (models, not measured object by object:
// TestGPUObjectCosts measures them). How many green contexts a
// configuration makes: WithGreenContextLimit.
type Overhead struct {
	Bytes                                   uint64 // all of it
	GreenContexts, Streams, Events, Modules uint64 // bytes, by kind
	// GreenMade counts the green contexts the pool made; GreenLive those
	// not destroyed; GreenKept those the process keeps for reuse on the
	// device (any pool's: in use, GreenLive less GreenKept); GreenLimit
	// is WithGreenContextLimit's bound (0: none).
	GreenMade, GreenLive, GreenKept      int
	GreenLimit                           int
	StreamsLive, EventsLive, ModulesLive int // objects alive
}

// DeviceMemory is the process's device memory as the device reports it
// (NVML's list of compute processes, WithMemorySampling), beside what the
// pool counted of it at the same moment (PoolStats.DeviceMemory).
type DeviceMemory struct {
	At      time.Time // when sampled; zero: never (Reason says why)
	Used    uint64    // the process's device memory, as NVML reports it
	Counted uint64    // what the pool counted of it then: MemoryOwn and Overhead.Bytes
	// Unaccounted is Used less Counted: memory nobody counted (the
	// primary context, libraries' own workspaces and caching
	// allocators); WithUnaccountedMemoryBound warns past a bound.
	Unaccounted uint64
	Charged     uint64 // of Unaccounted, what counts against MemoryLimit (WithUnaccountedHeadroom)
	Reason      string // why At is zero, or why the last sample failed
}

// Stats takes a snapshot of the pool. The tenants' figures are read one
// tenant at a time, so their sum may differ from MemoryUsed by allocations
// in flight.
func (p *Pool) Stats() PoolStats {
	var s PoolStats
	p.ReadStats(&s)
	return s
}

// ReadStats is Stats into s, reusing the room s.Tenants has, as
// runtime.ReadMemStats does: a loop that polls the pool makes no garbage
// (beyond a metered tenant's GPUTimeByClass), which the collector would
// otherwise reclaim on the request goroutines' time. Every field of s is
// overwritten.
func (p *Pool) ReadStats(s *PoolStats) {
	if s == nil {
		return
	}
	tenants := s.Tenants[:0]
	// MemoryUsed, not the tracker: with a shared region it reads the region,
	// which a Close racing this scrape may be unmapping.
	*s = PoolStats{Device: p.info, Health: p.Health(), MemoryUsed: p.MemoryUsed(), MemoryLimit: p.mem.Limit(), LatencyBusy: p.prio.LatencyBusy(),
		Overhead: Overhead(p.over.Read()), DeviceMemory: DeviceMemory(p.watch.Read())}
	s.Overhead.GreenKept = p.dev.KeptGreenCtxs()
	s.Closed, s.FreeSMs = p.tenants.Each(func(c *tenantCore) { // a kept list: no garbage
		tenants = append(tenants, c.Stats())
		s.MemoryCached += tenants[len(tenants)-1].MemoryCached
		s.MemoryOwn += c.mem.Charged()
	})
	slices.SortFunc(tenants, func(a, b Stats) int { return strings.Compare(a.Name, b.Name) })
	s.Tenants = tenants
}

// counted is what the pool counts of the process's device memory: its
// tenants' charges and its own objects'.
func (p *Pool) counted() uint64 {
	n := p.over.Bytes()
	p.tenants.Each(func(c *tenantCore) { n += c.mem.Charged() })
	return n
}

// Tenant returns the live tenant of that name, as NewTenant returned it.
// ok is false when there is none (never made, closed, or collected).
func (p *Pool) Tenant(name string) (t *Tenant, ok bool) {
	c, ok := p.tenants.Get(name)
	if !ok || c.closed.Load() {
		return nil, false
	}
	t = c.handle.Value()
	return t, t != nil
}
