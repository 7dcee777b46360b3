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
func (r *StallReport) err() error { return stall.Report(*r).Err() }

// Streams lists the tenant's streams for the watchdog (stall.Tenant), in
// its life lock: a Close waits for the look. A stream under capture is
// left out (a query or an event would break the capture; Capture waits
// for a look under way to end: watching).
func (m *member) Streams(f func([]stall.Stream)) bool {
	c := (*tenantCore)(m)
	return c.call(func() error {
		c.mu.Lock()
		listed := make([]stall.Listed, len(c.streams))
		for i, s := range c.streams {
			listed[i] = stall.Listed{Pin: (*watched)(s), Gen: s.Gen()} // its life now: a core reused later has another
		}
		c.mu.Unlock()
		stall.Look(listed, f)
		return nil
	}) == nil
}

// watched is a stream as the watchdog's look takes it (stall.Pin).
type watched streamCore

// Pin counts the look in as acquire does: counted in first, so that a
// Close's expire waits for the look, then checked (streams.Core.Watch).
func (w *watched) Pin(gen uint64) (stall.Stream, bool) {
	s := (*streamCore)(w)
	if !s.Watch(gen) {
		return stall.Stream{}, false
	}
	name := ""
	if k := s.Last(); k != nil {
		name = k.Name
	}
	return stall.Stream{Key: stall.Key{Core: uintptr(unsafe.Pointer(s)), Gen: gen}, H: s.h(), Class: s.Class().String(),
		Launches: s.Launches(), Kernel: name}, true
}

// Unpin ends the look's count.
func (w *watched) Unpin() { (*streamCore)(w).Unwatch() }

// Stalled marks the tenant stalled (stall.Tenant): its calls are refused
// with ErrStalled from now on, without waiting for those in flight. The
// watchdog then keeps the report (Health names it until the process
// exits), logs it and hands it to WithStallHandler's function.
func (m *member) Stalled(r stall.Report) bool {
	rep := StallReport(r)
	if !m.stall.CompareAndSwap(nil, &rep) {
		return false
	}
	m.life.Refuse()
	return true
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
	p.tenants.Forget(c.name, c)
	return fmt.Errorf("%w; closed without waiting: %d streams, %d bytes of memory and %d SMs (partitioned: %t) kept until the process exits",
		r.err(), len(streams), c.acct.Used(), c.place.SMs(), c.place.Partitioned())
}

// stalled lists the pool's stalled tenants' reports (Health), closed or
// not: their work holds what it holds until the process exits.
func (p *Pool) stalled() (reports []StallReport) {
	for _, r := range p.stalls.Seen() {
		reports = append(reports, StallReport(r))
	}
	return reports
}
