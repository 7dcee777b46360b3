package fcsp

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// regionLayout is the shape every process must agree on: 16 GPUs, 1024
// processes (about 4 MiB mapped).
var regionLayout = shm.Layout{Devices: 16, Slots: 1024}

// WithSharedRegion makes the pool one of several processes sharing the
// device's memory limit through a node-wide region (a file under /dev/shm,
// mapped and locked): every process's allocations count against one device
// total, and when a process dies (SIGKILL included) the survivors' reaper
// gives its usage back once its PID is gone or its heartbeat is older than
// the timeout. A region with a bad magic, version or size is refused.
func WithSharedRegion(path string) Option {
	return func(c *poolConfig) error {
		if path == "" {
			return fmt.Errorf("%w: empty shared region path (the default is %s)", ErrInvalidArgument, shm.DefaultPath)
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return fmt.Errorf("%w: shared region path %q is a directory; give a file in it (such as %s)", ErrInvalidArgument, path, filepath.Join(path, "fcsp"))
		}
		if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: shared region path %q: its folder %q does not exist", ErrInvalidArgument, path, filepath.Dir(path))
		}
		c.region = path
		return nil
	}
}

// WithForeignSharedRegion accepts a shared region file that another user
// owns, or that every user may write (containers of different users sharing
// /dev/shm). Without it such a file is refused with ErrUnsafeRegion: whoever
// can write the region can make every process refuse allocations or pass
// the device limit. A symbolic link is refused either way.
func WithForeignSharedRegion() Option {
	return func(c *poolConfig) error { c.foreign = true; return nil }
}

// WithHeartbeat sets how often this process marks itself alive in the
// shared region (default 1 s) and after how long without a beat a process
// is reaped (default 5 s).
func WithHeartbeat(every, timeout time.Duration) Option {
	return func(c *poolConfig) error {
		if every <= 0 || timeout <= every {
			return fmt.Errorf("%w: heartbeat every %v, timeout %v; want 0 < every < timeout", ErrInvalidArgument, every, timeout)
		}
		c.beat, c.reapAfter = every, timeout
		return nil
	}
}

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
