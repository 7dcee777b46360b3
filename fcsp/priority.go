package fcsp

import "fmt"

// Priority between tenants for what green contexts do not split: memory
// bandwidth (and L2, and the copy engines). A partition has SMs of its own,
// but its kernels read and write the same HBM as everyone else's: on the
// H200 a 16-SM triad ran at 808 GB/s alone and 548 GB/s beside a
// memory-bound neighbour on the other 116 SMs. A LatencyCritical tenant's
// work in flight holds its floored neighbours (WithBandwidthFloor) to a
// fraction of their GPU share, so they move less memory while it runs.
//
// "In flight" is known without waiting and without a polling thread: a
// per-pool count of LatencyCritical streams with metered work (launches,
// graphs, Do brackets) not yet seen complete, raised when it is queued and
// lowered when its end event is seen complete, by the stream's own poll
// (its next launch, Stats, its Synchronize) or by a floored neighbour's
// admission, which asks the driver with cuEventQuery (it never waits) while
// the count is raised.

// Priority is a tenant's rank for memory bandwidth.
type Priority int

const (
	// Normal tenants run as their limits say.
	Normal Priority = iota
	// LatencyCritical tenants hold their floored neighbours down while
	// they have work in flight. The tenant is metered (WithGPUMetering).
	// Its kernels launched through the SDK (Stream.Launch, TryLaunch, a
	// Reservation), its graph launches (LaunchGraph) and its work inside Do
	// on the streams Do times (see Current.Stream) count as in flight; work
	// on raw handles outside Do does not.
	LatencyCritical
)

func (p Priority) String() string {
	switch p {
	case Normal:
		return "normal"
	case LatencyCritical:
		return "latency-critical"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// priorityConfig is what WithPriority and WithBandwidthFloor asked for.
type priorityConfig struct {
	prio  Priority
	floor float64 // 0: none
	set   bool    // WithPriority was given
}

// checkPriority refuses contradictory priority options and turns on what
// they need: metering for a latency tenant, a GPU-time bucket for a
// floored one.
func (c *tenantConfig) checkPriority() error {
	switch {
	case c.prio.prio == LatencyCritical && c.prio.floor > 0:
		return fmt.Errorf("%w: WithBandwidthFloor on a LatencyCritical tenant; a floor is for the tenants that yield to it", ErrInvalidArgument)
	case c.prio.floor > 0 && c.smLimit > 0:
		return fmt.Errorf("%w: WithBandwidthFloor with WithSMLimit; a floor needs a GPU-time bucket: use WithGPUShare", ErrInvalidArgument)
	}
	if c.prio.prio == LatencyCritical {
		c.metered = true
	}
	if c.prio.floor > 0 && c.gpuShare == 0 {
		c.gpuShare, c.metered = 1, true
	}
	return nil
}

// LatencyBusy reports whether a LatencyCritical tenant of the pool has
// kernels in flight, as last seen (it asks the driver nothing).
func (p *Pool) LatencyBusy() bool { return p.prio.LatencyBusy() }
