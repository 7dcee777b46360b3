package fcsp

import (
	"fmt"
	"os"
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
		c.region = path
		return nil
	}
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
	region     *shm.Region
	slot       *shm.Slot
	stopBeat   func()
	stopReaper func()
}

func (p *Pool) joinRegion(index int) (memtrack.Option, error) {
	if index >= regionLayout.Devices {
		return nil, fmt.Errorf("%w: device %d; the shared region covers devices 0..%d", ErrInvalidArgument, index, regionLayout.Devices-1)
	}
	r, err := shm.Open(p.cfg.region, regionLayout, nil)
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
		p.log.Error("fcsp: this process was reaped from the shared region (heartbeat missed); its usage is no longer counted", "region", r.Path())
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
	s.slot.Leave()
	return s.region.Close()
}

// SharedUsed is the device's memory in use by every process of the shared
// region (0 without WithSharedRegion).
func (p *Pool) SharedUsed() uint64 {
	if p.shared == nil {
		return 0
	}
	return p.shared.region.DeviceUsed(p.info.Index)
}
