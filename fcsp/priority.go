package fcsp

import "github.com/fcsp-go/fcsp-go/internal/config"

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

// String is "normal" or "latency-critical" (Priority(n) for another n).
func (p Priority) String() string { return config.Priority(p).String() }
