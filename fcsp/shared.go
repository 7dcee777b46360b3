package fcsp

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// regionLayout is the shape every process must agree on: 16 GPUs, 1024
// processes (about 4 MiB mapped).
var regionLayout = shm.Layout{Devices: 16, Slots: 1024}

// sharedState is the pool's membership of a shared region.
type sharedState struct {
	// mu keeps the region mapped while a reader that is not a tenant's
	// call (a metrics scrape of MemoryUsed, SharedUsed) looks at it;
	// tenants' calls are over before close unmaps it.
	mu         sync.RWMutex
	unmapped   bool
	region     *shm.Region
	slot       *shm.Slot
	stopBeat   func()
	stopReaper func()
}

func (p *Pool) joinRegion(index int) (memtrack.Option, error) {
	if index >= regionLayout.Devices {
		return nil, fmt.Errorf("%w: device %d; the shared region covers devices 0..%d", ErrInvalidArgument, index, regionLayout.Devices-1)
	}
	r, err := shm.Open(p.cfg.region, regionLayout, &shm.Options{AllowForeign: p.cfg.foreign})
	if err != nil {
		return nil, err
	}
	slot, err := r.Join(os.Getpid())
	if err != nil {
		r.Close()
		return nil, err
	}
	beat, timeout := p.cfg.beat, p.cfg.reapAfter
	if beat == 0 {
		beat, timeout = time.Second, 5*time.Second
	}
	s := &sharedState{region: r, slot: slot}
	s.stopBeat = slot.StartHeartbeat(beat, func() {
		// The slot now refuses our writes: allocations fail with ErrReaped,
		// frees still free the device memory but move no shared count.
		p.log.Error("fcsp: this process was reaped from the shared region (heartbeat missed); allocations now fail with ErrReaped", "region", r.Path())
	})
	s.stopReaper = r.StartReaper(beat, timeout, func(slots []int) {
		p.log.Warn("fcsp: reaped dead processes from the shared region", "slots", slots)
	})
	p.shared = s
	share, err := slot.Device(index)
	if err != nil {
		_ = s.close()
		p.shared = nil
		return nil, err
	}
	return memtrack.WithShared(share), nil
}

func (s *sharedState) close() error {
	if s == nil {
		return nil
	}
	s.stopReaper()
	s.stopBeat()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slot.Leave()
	s.unmapped = true
	return s.region.Close()
}

// read returns f() while the region is mapped, 0 once it is not.
func (s *sharedState) read(f func() uint64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.unmapped {
		return 0
	}
	return f()
}

// SharedUsed is the device's memory in use by every process of the shared
// region (0 without WithSharedRegion, and after Close).
func (p *Pool) SharedUsed() uint64 {
	if p.shared == nil {
		return 0
	}
	return p.shared.read(func() uint64 { return p.shared.region.DeviceUsed(p.info.Index) })
}
