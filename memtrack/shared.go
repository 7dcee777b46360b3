package memtrack

import "fmt"

// SharedDevice is one device's memory use shared by several processes: this
// process's own usage, which it adds to and subtracts from, and the total of
// every process sharing the device. fcsp's node-wide region (a /dev/shm
// file, fcsp.WithSharedRegion) implements it with one word per process, so
// that the usage of a process that dies can be cleared exactly.
type SharedDevice interface {
	// Add adds n bytes to this process's usage; Sub subtracts them. Both
	// fail, changing nothing, once the usage is no longer this process's
	// (fcsp's region: shm.ErrReaped, which memtrack.ErrReaped is).
	Add(n uint64) error
	Sub(n uint64) error
	// Used is the usage of every process sharing the device.
	Used() uint64
}

// WithShared backs the tracker's device total with d, so that every process
// sharing the device enforces one device limit: a Reserve in one process is
// seen by the device-limit check of all others. The tracker accounts its
// own usage through d.Add and d.Sub.
//
// Shared admission costs one d.Used on top of the local path (with fcsp's
// region, one load per process, not per tenant).
//
// Tenant totals and allocation records stay process-local. Every process
// should use the same device limit; each enforces the limit it was given
// against the shared total.
//
// d must stay valid while the tracker is in use. If a reaper takes the
// process's usage over (fcsp's shared region: the process stopped
// heartbeating for longer than the reaper timeout: a SIGSTOP, a long pause,
// a frozen cgroup), d refuses the tracker's writes: every later Reserve
// fails with ErrReaped (d.Add's error), and releases change only the
// process-local counts, since the reaper already gave the usage back.
// Nothing the stale process does can move another process's count or wrap
// the node-wide total.
func WithShared(d SharedDevice) Option {
	return func(t *Tracker) error {
		if d == nil {
			return fmt.Errorf("%w: WithShared(nil); give it the device's shared usage", ErrInvalidArgument)
		}
		t.share = d
		return nil
	}
}
