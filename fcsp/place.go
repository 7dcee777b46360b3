package fcsp

import (
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/life"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// placement is where a tenant's work runs, chosen once in NewTenant
// (internal/place says what each method means): a partition of the
// device's SMs (greenPlace), the pool's commons, or the whole device shared
// through its primary context (Pool.whole). Its methods beyond the core
// ask the placement for the capability and answer as the whole device
// does where it lacks it; what needs the Pool or a public type is
// converted here.
type placement struct{ place.Placement }

func greenPlace(p *smpart.Partition) placement { return placement{place.NewGreen(p)} }

func (pl placement) Partitioned() bool              { return place.Partitioned(pl.Placement) }
func (pl placement) IsContext(cc cuda.Context) bool { return place.IsContext(pl.Placement, cc) }
func (pl placement) DoGreen(f func(cc cuda.Context) error) error {
	return place.DoGreen(pl.Placement, f)
}
func (pl placement) Layout() int      { return place.Layout(pl.Placement) }
func (pl placement) Reshapable() bool { return place.Reshapable(pl.Placement) }
func (pl placement) Sizes() []int     { return place.Sizes(pl.Placement) }
func (pl placement) Close() error     { return place.Close(pl.Placement) }

// waits reports the waits for a partition's green contexts; none where
// nothing excludes. WaitStats has smpart.WaitStats's fields.
func (pl placement) waits() WaitStats { return WaitStats(place.Waits(pl.Placement)) }

// member is the tenant as the pool's moves of SMs see it (smmove.Member):
// a conversion of the core's pointer, as host is for the engines.
type member tenantCore

func (m *member) Name() string           { return m.name }
func (m *member) Place() place.Placement { return m.place.Placement }
func (m *member) Calls() *life.Lock      { return &m.life }
func (m *member) Dos() *inside.Threads   { return &m.dos }

// Resized resizes a launch-rate limit, which is threads per refill period
// of the tenant's SMs (a GPU share is of the device's time, whatever the
// SMs); the sizes were checked against the layouts, so it cannot fail.
func (m *member) Resized(sms int) error { return m.adm.SetSMs(sms) }

// Swapper moves each of the tenant's streams of the partition (or the
// commons) on old to new: the list is taken now, while its calls are held
// (NewStream is one), so that the swap, called under the partition's
// lock, takes none.
func (m *member) Swapper() func(old, new cuda.Stream) {
	m.mu.Lock()
	streams := append([]*streamCore(nil), m.streams...)
	m.mu.Unlock()
	return func(old, new cuda.Stream) {
		for _, s := range streams {
			s.Swap(old, new)
		}
	}
}

// QueueBound bounds the GPU time the tenant keeps queued ahead (the rest,
// while a latency class may take its SMs; internal/admission).
func (m *member) QueueBound(horizon time.Duration) error { return m.adm.SetQueueBound(horizon) }

// Rewarm runs the tenant's warm-up, if it has one, in the commons'
// contexts after a move (place.Rewarm), in the life lock (a Close waits
// for it); a failure is logged, and the next Do in that context runs it
// again (place.Warming.Take).
func (m *member) Rewarm() {
	c := (*tenantCore)(m)
	if err := c.call(func() error { return place.Rewarm(c.place.Placement) }); err != nil && c.alive() == nil {
		c.pool.log.Warn("warm-up failed after the unpartitioned tenants moved; the next Do in that context runs it again",
			"tenant", c.name, "sms", c.place.SMs(), "err", err)
	}
}
