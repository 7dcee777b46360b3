package fcsp

import (
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// placement is where a tenant's work runs, chosen once in NewTenant
// (internal/place says what each method means): a partition of the
// device's SMs (greenPlace), the pool's commons, or the whole device shared
// through its primary context (Pool.whole). Its methods beyond the core
// ask the placement for the capability (place.Slotted, Owned, Reshaper)
// and answer as the whole device does where it lacks it; what needs the
// Pool or a public type is converted here.
type placement struct{ place.Placement }

func greenPlace(p *smpart.Partition) placement { return placement{place.NewGreen(p)} }

func (pl placement) Partitioned() bool               { return place.Partitioned(pl.Placement) }
func (pl placement) IsContext(ctx cuda.Context) bool { return place.IsContext(pl.Placement, ctx) }
func (pl placement) DoGreen(f func(ctx cuda.Context) error) error {
	return place.DoGreen(pl.Placement, f)
}
func (pl placement) Dos() int         { return place.Dos(pl.Placement) }
func (pl placement) Layout() int      { return place.Layout(pl.Placement) }
func (pl placement) Reshapable() bool { return place.Reshapable(pl.Placement) }
func (pl placement) Sizes() []int     { return place.Sizes(pl.Placement) }
func (pl placement) Close() error     { return place.Close(pl.Placement) }

func (pl placement) Claim(sms int) error { return place.Claim(pl.Placement, sms) }
func (pl placement) Unclaim()            { place.Unclaim(pl.Placement) }

func (pl placement) Reshape(sms int, swap func(old, new cuda.Stream)) error {
	return place.Reshape(pl.Placement, sms, swap)
}

// waits reports the waits for a partition's green contexts; none where
// nothing excludes. WaitStats has smpart.WaitStats's fields.
func (pl placement) waits() WaitStats { return WaitStats(place.Waits(pl.Placement)) }

// retire keeps a partition for p's spares while p is open and wants its
// size, else closes it; spare is the caller's to keep or close.
func (pl placement) retire(p *Pool) (spare *smpart.Partition, err error) {
	keep := false
	if pl.Partitioned() {
		p.mu.Lock()
		keep = !p.closed && p.spare.Wants(pl.SMs())
		p.mu.Unlock()
	}
	return place.Retire(pl.Placement, keep)
}
