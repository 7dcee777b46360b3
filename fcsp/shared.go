package fcsp

import (
	"os"

	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// newTracker makes the pool's memory tracker, of the device's limit
// (hamienv.Config.DeviceLimit). With WithSharedRegion it joins the region
// for device index, and counts there too.
func (p *Pool) newTracker(index int) (err error) {
	var opts []memtrack.Option
	if p.cfg.Region != "" {
		m, share, err := shm.JoinDevice(shm.MemberConfig{
			Path: p.cfg.Region, Layout: shm.PoolLayout, Options: &shm.Options{AllowForeign: p.cfg.Foreign}, PID: os.Getpid(),
			Beat: p.cfg.Beat, ReapAfter: p.cfg.ReapAfter,
			OnReaped: func() {
				// The slot now refuses our writes: allocations fail with
				// ErrReaped, frees still free the device memory but move no
				// shared count.
				p.log.Error("fcsp: this process was reaped from the shared region (heartbeat missed); allocations now fail with ErrReaped", "region", p.cfg.Region)
			},
			OnLost: func(err error) {
				p.log.Error("fcsp: the shared region was lost under this process; allocations now fail with ErrBadRegion until the pool is reopened", "region", p.cfg.Region, "err", err)
			},
			OnReap: func(slots []int) { p.log.Warn("fcsp: reaped dead processes from the shared region", "slots", slots) },
		}, index)
		if err != nil {
			return err
		}
		p.shared, opts = m, []memtrack.Option{memtrack.WithShared(share)}
	}
	p.mem, err = memtrack.New(p.env.DeviceLimit(index, p.info.TotalMemory, p.cfg.MemLimit), opts...)
	return err
}
