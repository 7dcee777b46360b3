package fcsp

import (
	"os"

	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// joinRegion joins the shared region (WithSharedRegion) for device index,
// whose memory the tracker then counts there too.
func (p *Pool) joinRegion(index int) (memtrack.Option, error) {
	m, share, err := shm.JoinDevice(shm.MemberConfig{
		Path: p.cfg.Region, Layout: shm.PoolLayout, Options: &shm.Options{AllowForeign: p.cfg.Foreign}, PID: os.Getpid(),
		Beat: p.cfg.Beat, ReapAfter: p.cfg.ReapAfter,
		OnReaped: func() {
			// The slot now refuses our writes: allocations fail with
			// ErrReaped, frees still free the device memory but move no
			// shared count.
			p.log.Error("fcsp: this process was reaped from the shared region (heartbeat missed); allocations now fail with ErrReaped", "region", p.cfg.Region)
		},
		OnReap: func(slots []int) { p.log.Warn("fcsp: reaped dead processes from the shared region", "slots", slots) },
	}, index)
	if err != nil {
		return nil, err
	}
	p.shared = m
	return memtrack.WithShared(share), nil
}

// SharedUsed is the device's memory in use by every process of the shared
// region (0 without WithSharedRegion, and after Close).
func (p *Pool) SharedUsed() uint64 { return p.shared.DeviceUsed(p.info.Index) }
