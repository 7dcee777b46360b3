// Package poolmem makes a pool's account of its device's memory, once, as
// the pool's options ask: the tracker of the device limit (the device's
// memory, WithDeviceMemoryLimit or HAMi's CUDA_DEVICE_MEMORY_LIMIT,
// whichever is smallest: internal/hamienv), counting in the node's shared
// region beside the other processes' where one is given
// (WithSharedRegion: internal/shm), the SDK's own objects charged against
// it (internal/overhead), and the sampling of the device's own
// view of the process's memory beside what the pool counts
// (internal/memwatch), whose difference is warned of past a bound or
// charged against the limit. The pool holds what is made here; its Close
// lets it go (internal/teardown).
package poolmem

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/fcsp-go/fcsp-go/internal/config"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/hamienv"
	"github.com/fcsp-go/fcsp-go/internal/memwatch"
	"github.com/fcsp-go/fcsp-go/internal/overhead"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Tracker makes a pool's memory tracker for device index, of the device's
// limit (env's DeviceLimit, of its total bytes and cfg's limit), and
// charges the pool's own objects against it (over, bound: what Open made
// so far, and every later object). With a shared region
// (WithSharedRegion) it joins the region for that device, and counts
// there too: shared is then the process's membership, nil without one.
// What was made is returned with an error, for the pool's Close to let
// go.
func Tracker(cfg *config.Pool, env hamienv.Config, index int, total uint64, over *overhead.Meter, log *slog.Logger) (tracker *memtrack.Tracker, shared *shm.Member, err error) {
	var opts []memtrack.Option
	if cfg.Region != "" {
		m, share, err := shm.JoinDevice(shm.MemberConfig{
			Path: cfg.Region, Layout: shm.PoolLayout, Options: &shm.Options{AllowForeign: cfg.Foreign}, PID: os.Getpid(),
			Beat: cfg.Beat, ReapAfter: cfg.ReapAfter,
			OnReaped: func() {
				// The slot now refuses our writes: allocations fail with
				// ErrReaped, frees still free the device memory but move no
				// shared count.
				log.Error("fcsp: this process was reaped from the shared region (heartbeat missed); allocations now fail with ErrReaped", "region", cfg.Region)
			},
			OnLost: func(err error) {
				log.Error("fcsp: the shared region was lost under this process; allocations now fail with ErrBadRegion until the pool is reopened", "region", cfg.Region, "err", err)
			},
			OnReap: func(slots []int) { log.Warn("fcsp: reaped dead processes from the shared region", "slots", slots) },
		}, index)
		if err != nil {
			return nil, nil, err
		}
		shared, opts = m, []memtrack.Option{memtrack.WithShared(share)}
	}
	if tracker, err = memtrack.New(env.DeviceLimit(index, total, cfg.MemLimit), opts...); err != nil {
		return nil, shared, err
	}
	return tracker, shared, over.Bind(tracker)
}

// Sampling is where and beside what a pool's watch samples (Watch).
type Sampling struct {
	Drv       cuda.Driver // the pool's: the fake driver says the figure itself (memwatch.SourceFor)
	UUID      string      // the device's, as NVML names it
	Simulated bool
	Tracker   *memtrack.Tracker // charged the unaccounted memory, under WithUnaccountedHeadroom
	Counted   func() uint64     // what the pool counts of the process's device memory
	Log       *slog.Logger
	Done      <-chan struct{} // closed when the pool closes: the sampling stops
}

// Watch starts the sampling of the device's view of the process's memory
// as cfg asks (internal/memwatch), until s.Done closes: none where cfg
// samples nothing (WithMemorySampling(0), or the simulator without it),
// which is ErrInvalidArgument where the unaccounted bound or the headroom
// asks for the figure.
func Watch(cfg *config.Pool, s Sampling) (*memwatch.Watch, error) {
	every := cfg.SamplePeriod()
	if every == 0 {
		if cfg.Headroom || cfg.Unaccounted > 0 {
			return nil, fmt.Errorf("%w: WithUnaccountedHeadroom and WithUnaccountedMemoryBound need the device's figure, which is not sampled (WithMemorySampling(0), or the simulator without WithMemorySampling)", errs.ErrInvalidArgument)
		}
		return memwatch.Off("not sampled (WithMemorySampling)"), nil
	}
	var charge *memtrack.Tracker
	if cfg.Headroom {
		charge = s.Tracker
	}
	open := func() (memwatch.Source, func(), error) {
		return memwatch.SourceFor(s.Drv, s.UUID, s.Simulated)
	}
	return memwatch.Start(memwatch.Config{Every: every, Open: open, Counted: s.Counted, Warn: cfg.Unaccounted,
		Charge: charge, Log: s.Log, Done: s.Done}), nil
}
