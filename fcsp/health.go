package fcsp

import (
	"slices"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/fault"
)

// The fault domain of a green context is the process, not the partition
// (internal/fault says more): the pool turns lost at the first sticky
// error any of its driver calls meets, and from then on answers every call
// with the same *DeviceLostError without calling the driver. There is no
// way back in-process (Health.RestartRequired).

// DeviceLostError is a sticky device error as the pool first saw it.
// errors.Is(err, ErrDeviceLost) holds, and errors.As gives the *CUDAError.
type DeviceLostError struct {
	Err    *CUDAError // the driver's sticky error
	Op     string     // the driver call that answered it first (e.g. "cuGraphLaunch")
	Tenant string     // the tenant whose call saw it first ("" if none could be named)
	Stream uintptr    // the stream that call named (0: none)
	At     time.Time  // when the pool first saw it
}

// Unwrap gives ErrDeviceLost and the driver's error.
func (e *DeviceLostError) Unwrap() []error {
	return []error{ErrDeviceLost, e.Err}
}

// Health is the pool's fault state.
type Health struct {
	// Lost is the sticky error that poisoned the device, nil while it is
	// healthy: which error, from which call, when (Lost.At), and which
	// tenant and stream saw it first.
	Lost *DeviceLostError
	// Stalled lists the tenants found stalled (WithStallTimeout), closed
	// or not: which stream, since when, what was queued. The other tenants
	// serve on; the stuck work holds its tenant's SMs and memory until the
	// process exits.
	Stalled []StallReport
	// RestartRequired is Lost != nil or a stall, said once more for a
	// supervisor: a lost device never comes back in this process (the
	// driver keeps a sticky fault until the process exits), and no driver
	// call ends a kernel short of the process's exit, so the process
	// should be replaced; for a stall, at a time of the supervisor's
	// choosing (its other classes still serve). Shut the pool down first:
	// it still frees what it made, and names what it must leave.
	RestartRequired bool
}

// Healthy reports whether the pool serves (a stalled tenant's neighbours
// do).
func (h Health) Healthy() bool { return h.Lost == nil }

// Health reports whether the device is lost, and which tenants stalled.
func (p *Pool) Health() Health {
	lost, _ := p.fault.Err().(*DeviceLostError)
	stalled := p.stalled()
	return Health{Lost: lost, Stalled: stalled, RestartRequired: lost != nil || len(stalled) > 0}
}

// lostError is the pool's error for r.
func lostError(r fault.Record) error { return new(DeviceLostError(r)) }

// whose names the tenant that owns stream s, or partition context ctx. It
// runs inside a driver call's return, on the caller's goroutine, which may
// hold a lock ranked after the pool's (its roster's, internal/tenancy)
// and the tenants' mu (an engine's, such
// as a partition's or a pool charge's, held across its driver calls:
// docs/LOCKS.md), so it only tries them: a name that cannot be had at once
// is left out rather than waited for.
func (p *Pool) whose(cc cuda.Context, s cuda.Stream) string {
	return p.tenants.TryFind(func(c *tenantCore) bool {
		if s != 0 && c.mu.TryLock() {
			has := slices.ContainsFunc(c.streams, func(st *streamCore) bool { return st.h() == s })
			c.mu.Unlock()
			if has {
				return true
			}
		}
		return c.place.IsContext(cc)
	})
}
