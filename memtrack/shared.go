package memtrack

import "fmt"

// SharedDevice is one device's memory use shared by several processes: this
// process's own usage, which it adds to and subtracts from, and the total of
// every process sharing the device. fcsp's node-wide region (a /dev/shm
// file, fcsp.WithSharedRegion) implements it with one word per process, so
// that the usage of a process that dies can be cleared exactly.
type SharedDevice interface {
	// Add adds n bytes to this process's usage; Sub subtracts them.
	Add(n uint64)
	Sub(n uint64)
	// Used is the usage of every process sharing the device.
	Used() uint64
}

// WithShared backs the tracker's device total with d, so that every process
// sharing the device enforces one device limit: a Reserve in one process is
// seen by the device-limit check of all others. The tracker accounts its
// own usage through d.Add and d.Sub.
//
// Shared admission costs one d.Used on top of the local path (with fcsp's
// region, one load per process, not per tenant); see Tracker.sharedReserve.
//
// Tenant totals and allocation records stay process-local. Every process
// should use the same device limit; each enforces the limit it was given
// against the shared total.
//
// d must stay valid while the tracker is in use. If the process's usage is
// cleared behind the tracker's back (fcsp's reaper does so for a process
// that stopped heartbeating), the tracker's later releases would subtract
// usage already subtracted: treat that as fatal for the process's GPU work.
func WithShared(d SharedDevice) Option {
	return func(t *Tracker) error {
		if d == nil {
			return fmt.Errorf("%w: WithShared(nil); give it the device's shared usage", ErrInvalidArgument)
		}
		t.share = d
		return nil
	}
}
