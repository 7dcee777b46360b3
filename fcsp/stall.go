package fcsp

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/fcsp-go/fcsp-go/internal/stall"
)

// StallReport is a stalled tenant (WithStallTimeout): the stream whose
// work made no progress for the bound, since when, and what was queued.
type StallReport struct {
	Tenant string
	Stream uintptr       // the stream's CUstream
	Class  string        // its class
	Since  time.Time     // the last progress seen on it, or when its work was first seen
	Found  time.Time     // when the watchdog found it stalled
	Bound  time.Duration // the tenant's stall timeout
	Queued uint64        // kernels launched on it through the SDK since its last progress (where it was busy when first seen: in all)
	Kernel string        // the last kernel launched on it through the SDK ("": a Do's or a fill's work)
}

// err is the tenant's calls' answer once it is stalled.
func (r *StallReport) err() error {
	return fmt.Errorf("%w: stream %#x (%s) made no progress from %s for %v (kernel %q last, %d launched since); "+
		"its work holds its SMs and memory until the process exits", ErrStalled, r.Stream, r.Class, r.Since.Format(time.RFC3339Nano),
		r.Found.Sub(r.Since).Round(time.Millisecond), r.Kernel, r.Queued)
}

// watchStalls watches the tenant's streams where a stall timeout applies
// (its own, or the pool's); at NewTenant, once it is listed.
func (c *tenantCore) watchStalls(own time.Duration) {
	bound := own
	if own == 0 {
		bound = c.pool.cfg.Stall
	}
	if bound > 0 {
		c.pool.stalls.Watch((*member)(c), bound)
	}
}

// Streams lists the tenant's streams for the watchdog (stall.Tenant), in
// its life lock: a Close waits for the look. A stream under capture is
// left out (a query or an event would break the capture; Capture waits
// for a look under way to end: watching).
func (m *member) Streams(f func([]stall.Stream)) bool {
	c := (*tenantCore)(m)
	return c.call(func() error {
		type core struct {
			s   *streamCore
			gen uint64
		}
		c.mu.Lock()
		cores := make([]core, len(c.streams))
		for i, s := range c.streams {
			cores[i] = core{s, s.Gen()} // its life now: a core reused later has another
		}
		c.mu.Unlock()
		list := make([]stall.Stream, 0, len(cores))
		for i := range cores {
			s := cores[i].s
			if !s.Watch(cores[i].gen) { // counted in, as acquire does, then checked
				cores[i].s = nil
				continue
			}
			name := ""
			if k := s.Last(); k != nil {
				name = k.Name
			}
			list = append(list, stall.Stream{Key: stall.Key{Core: uintptr(unsafe.Pointer(s)), Gen: cores[i].gen}, H: s.h(),
				Class: s.Class().String(), Launches: s.Launches(), Kernel: name})
		}
		defer func() {
			for _, k := range cores {
				if k.s != nil {
					k.s.Unwatch()
				}
			}
		}()
		f(list)
		return nil
	}) == nil
}

// Stalled marks the tenant stalled (stall.Tenant): its calls are refused
// with ErrStalled from now on, without waiting for those in flight.
func (m *member) Stalled(r stall.Report) {
	c := (*tenantCore)(m)
	rep := StallReport(r)
	if !c.stall.CompareAndSwap(nil, &rep) {
		return
	}
	c.life.Refuse()
	c.pool.mu.Lock()
	c.pool.stalledSeen = append(c.pool.stalledSeen, rep) // Health names it until the process exits
	c.pool.mu.Unlock()
	c.pool.log.Warn("tenant stalled: its work made no progress for its stall timeout; its calls are refused, the other tenants serve on; replace the process",
		"tenant", c.name, "stream", fmt.Sprintf("%#x", r.Stream), "class", r.Class, "since", r.Since, "for", r.Found.Sub(r.Since),
		"kernel", r.Kernel, "queued", r.Queued)
	if f, ok := c.pool.cfg.OnStall.(func(StallReport)); ok {
		go f(rep)
	}
}

// abandon is a stalled tenant's close: what its stuck work may still use
// stays where it is until the process exits (its memory charged, its SMs
// held, its streams and contexts kept: nothing reaches a next owner under
// that work); the tenant leaves the pool's list, and the commons forgets
// its streams, so that the pool's Close does not wait for them. Its error
// says what was kept.
func (c *tenantCore) abandon(r *StallReport) error {
	p := c.pool
	c.mu.Lock()
	streams := c.streams
	c.mu.Unlock()
	if !c.place.Partitioned() {
		for _, s := range streams {
			if s.Own() {
				p.moves.Abandon(s.h())
			}
		}
	}
	p.mu.Lock()
	if p.tenants[c.name] == c {
		delete(p.tenants, c.name)
	}
	p.mu.Unlock()
	return fmt.Errorf("%w; closed without waiting: %d streams, %d bytes of memory and %d SMs (partitioned: %t) kept until the process exits",
		r.err(), len(streams), c.acct.Used(), c.place.SMs(), c.place.Partitioned())
}

// stalled lists the pool's stalled tenants' reports (Health), closed or
// not: their work holds what it holds until the process exits.
func (p *Pool) stalled() []StallReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]StallReport(nil), p.stalledSeen...)
}
