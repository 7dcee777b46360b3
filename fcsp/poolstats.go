package fcsp

import (
	"slices"
	"strings"
	"sync"
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
	MemoryUsed  uint64 // bytes of device memory counted against MemoryLimit (under WithSharedRegion, every process's): plain tenants' allocations and what the tenants' pools map
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
}

// Stats takes a snapshot of the pool. The tenants' figures are read one
// tenant at a time, so their sum may differ from MemoryUsed by allocations
// in flight.
func (p *Pool) Stats() PoolStats {
	var s PoolStats
	p.ReadStats(&s)
	return s
}

// coreLists are ReadStats's lists of the live tenants, kept for reuse: a
// list on the stack held 16, and a pool of more (a class per model, a
// storm's short-lived tenants) grew a new array at every call.
var coreLists = sync.Pool{New: func() any { l := make([]*tenantCore, 0, 16); return &l }}

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
	*s = PoolStats{Device: p.info, Health: p.Health(), MemoryUsed: p.MemoryUsed(), MemoryLimit: p.mem.Limit(), LatencyBusy: p.prio.LatencyBusy()}
	list := coreLists.Get().(*[]*tenantCore)
	p.mu.Lock()
	s.Closed = p.closed
	s.FreeSMs = p.split.FreeSMs() + p.spare.SMs()
	cores := p.cores((*list)[:0])
	p.mu.Unlock()
	for _, c := range cores {
		tenants = append(tenants, c.Stats())
		s.MemoryCached += tenants[len(tenants)-1].MemoryCached
		s.MemoryOwn += c.mem.Charged()
	}
	clear(cores) // a pooled list must not keep closed tenants reachable
	*list = cores[:0]
	coreLists.Put(list)
	slices.SortFunc(tenants, func(a, b Stats) int { return strings.Compare(a.Name, b.Name) })
	s.Tenants = tenants
}

// Tenant returns the live tenant of that name, as NewTenant returned it.
// ok is false when there is none (never made, closed, or collected).
func (p *Pool) Tenant(name string) (t *Tenant, ok bool) {
	p.mu.Lock()
	c := p.tenants[name]
	p.mu.Unlock()
	if c == nil || c.closed.Load() {
		return nil, false
	}
	t = c.handle.Value()
	return t, t != nil
}

// checkQuota refuses a tenant quota the pool could never grant: more than
// the device's limit, wherever that limit comes from.
func (p *Pool) checkQuota(quota uint64) error {
	return p.env.CheckQuota(p.info.Index, p.info.TotalMemory, p.mem.Limit(), quota)
}
