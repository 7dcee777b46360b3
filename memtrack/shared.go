package memtrack

import (
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/shm"
)

// WithShared backs the tracker's device total with device dev of the
// node-wide region that slot belongs to, so that every process sharing the
// region enforces one device limit: a Reserve in one process is seen by the
// device-limit check of all others. The tracker accounts its usage in the
// slot, which is what the region's reaper clears if the process dies.
//
// Shared admission costs one load per region slot (processes, not
// tenants) on top of the local path; see Tracker.sharedReserve.
//
// Tenant totals and allocation records stay process-local. Every process
// should use the same device limit; each enforces the limit it was given
// against the shared total.
//
// The slot must stay joined while the tracker is in use. If a reaper takes
// the slot over (the process stopped heartbeating for longer than the
// reaper timeout: a SIGSTOP, a long pause, a frozen cgroup), the slot
// refuses the tracker's writes: every later Reserve fails with ErrReaped,
// and releases change only the process-local counts, since the reaper
// already gave the slot's usage back. Nothing the stale process does can
// move another process's count or wrap the node-wide total.
func WithShared(slot *shm.Slot, dev int) Option {
	return func(t *Tracker) error {
		if slot == nil {
			return fmt.Errorf("memtrack: WithShared: nil slot")
		}
		if l := slot.Region().Layout(); dev < 0 || dev >= l.Devices {
			return fmt.Errorf("memtrack: WithShared: device %d out of range; the region has devices 0..%d", dev, l.Devices-1)
		}
		t.share = slot.Region()
		t.devIdx = dev
		t.slot = slot.Usage(dev)
		return nil
	}
}
