package fcsp

import (
	"fmt"
	"os"

	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// regionLayout is the shape every process must agree on: 16 GPUs, 1024
// processes (about 4 MiB mapped).
var regionLayout = shm.Layout{Devices: 16, Slots: 1024}

func (p *Pool) joinRegion(index int) (memtrack.Option, error) {
	if index >= regionLayout.Devices {
		return nil, fmt.Errorf("%w: device %d; the shared region covers devices 0..%d", ErrInvalidArgument, index, regionLayout.Devices-1)
	}
	m, err := shm.JoinMember(shm.MemberConfig{
		Path: p.cfg.Region, Layout: regionLayout, Options: &shm.Options{AllowForeign: p.cfg.Foreign}, PID: os.Getpid(),
		Beat: p.cfg.Beat, ReapAfter: p.cfg.ReapAfter,
		OnReaped: func() {
			// The slot now refuses our writes: allocations fail with
			// ErrReaped, frees still free the device memory but move no
			// shared count.
			p.log.Error("fcsp: this process was reaped from the shared region (heartbeat missed); allocations now fail with ErrReaped", "region", p.cfg.Region)
		},
		OnReap: func(slots []int) { p.log.Warn("fcsp: reaped dead processes from the shared region", "slots", slots) },
	})
	if err != nil {
		return nil, err
	}
	p.shared = m
	share, err := m.Device(index)
	if err != nil {
		_ = m.Close()
		p.shared = nil
		return nil, err
	}
	return memtrack.WithShared(share), nil
}

// SharedUsed is the device's memory in use by every process of the shared
// region (0 without WithSharedRegion, and after Close).
func (p *Pool) SharedUsed() uint64 {
	if p.shared == nil {
		return 0
	}
	return p.shared.DeviceUsed(p.info.Index)
}
