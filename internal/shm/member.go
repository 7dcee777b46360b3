package shm

import (
	"fmt"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// MemberConfig says how a process joins a region as a Member.
type MemberConfig struct {
	Path    string
	Layout  Layout
	Options *Options
	PID     int // normally os.Getpid()
	// Beat is the heartbeat's period and ReapAfter how long a silent
	// member lives on before this one's reaper frees its slot; both zero
	// mean 1 s and 5 s.
	Beat, ReapAfter time.Duration
	// OnReaped hears that this process was reaped (its heartbeat missed):
	// the slot then refuses its writes. OnLost hears that the region was
	// lost under this process (its file truncated while mapped): the
	// member's writes then fail with that error (ErrBadRegion). OnReap
	// hears the slots of dead processes this member's reaper freed. Any
	// may be nil.
	OnReaped func()
	OnLost   func(error)
	OnReap   func(slots []int)
}

// Member is a process's membership of a region: its slot, kept alive by a
// heartbeat, and a reaper of dead members' slots.
type Member struct {
	// mu keeps the region mapped while a reader that is not an accounted
	// call (a metrics scrape) looks at it; Close unmaps it under mu.
	mu         sync.RWMutex
	unmapped   bool
	region     *Region
	slot       *Slot
	stopBeat   func()
	stopReaper func()
}

// JoinMember opens the region at cfg.Path, joins it for cfg.PID, and
// starts the heartbeat and the reaper.
func JoinMember(cfg MemberConfig) (*Member, error) {
	r, err := Open(cfg.Path, cfg.Layout, cfg.Options)
	if err != nil {
		return nil, err
	}
	slot, err := r.Join(cfg.PID)
	if err != nil {
		r.Close()
		return nil, err
	}
	beat, timeout := cfg.Beat, cfg.ReapAfter
	if beat == 0 {
		beat, timeout = time.Second, 5*time.Second
	}
	m := &Member{region: r, slot: slot}
	m.stopBeat = slot.StartHeartbeat(beat, func() {
		switch err := r.Lost(); {
		case err != nil && cfg.OnLost != nil:
			cfg.OnLost(err)
		case err == nil && cfg.OnReaped != nil:
			cfg.OnReaped()
		}
	})
	m.stopReaper = r.StartReaper(beat, timeout, cfg.OnReap)
	return m, nil
}

// Device is the member's share of device dev; a Close after an error
// leaves the region.
func (m *Member) Device(dev int) (*DeviceShare, error) { return m.slot.Device(dev) }

// Slot is the member's slot in the region.
func (m *Member) Slot() *Slot { return m.slot }

// Close stops the heartbeat and the reaper, leaves the slot and unmaps the
// region. A nil Member closes to nil.
func (m *Member) Close() error {
	if m == nil {
		return nil
	}
	m.stopReaper()
	m.stopBeat()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.slot.Leave()
	m.unmapped = true
	return m.region.Close()
}

// Read returns f() while the region is mapped, 0 once it is not. A nil
// Member (a pool without a shared region) returns f().
func (m *Member) Read(f func() uint64) uint64 {
	if m == nil {
		return f()
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.unmapped {
		return 0
	}
	return f()
}

// DeviceUsed is device dev's memory in use by every member of the region
// (0 once this member closed, and for a nil Member).
func (m *Member) DeviceUsed(dev int) uint64 {
	if m == nil {
		return 0
	}
	return m.Read(func() uint64 { return m.region.DeviceUsed(dev) })
}

// Slots lists the region's members (none for a nil Member or once this
// one closed): for diagnostics, as a test that waits for a reap says what
// it found.
func (m *Member) Slots() []SlotInfo {
	if m == nil {
		return nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.unmapped {
		return nil
	}
	return m.region.Slots()
}

// PoolLayout is the shape every pool's process must agree on: 16 GPUs,
// 1024 processes (about 4 MiB mapped).
var PoolLayout = Layout{Devices: 16, Slots: 1024}

// JoinDevice is JoinMember for device dev of cfg.Layout, with the member's
// share of that device. A dev past the layout's is errs.ErrInvalidArgument.
func JoinDevice(cfg MemberConfig, dev int) (*Member, *DeviceShare, error) {
	if dev >= cfg.Layout.Devices {
		return nil, nil, fmt.Errorf("%w: device %d; the shared region covers devices 0..%d", errs.ErrInvalidArgument, dev, cfg.Layout.Devices-1)
	}
	m, err := JoinMember(cfg)
	if err != nil {
		return nil, nil, err
	}
	share, err := m.Device(dev)
	if err != nil {
		_ = m.Close()
		return nil, nil, err
	}
	return m, share, nil
}
