package fcsp

import (
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// placement is where a tenant's work runs, chosen once in NewTenant
// (internal/place says what each method means): a partition of the
// device's SMs (greenPlace), or the whole device shared through its primary
// context (Pool.whole). What needs the Pool or a public type is converted
// here.
type placement struct{ place.Placement }

func greenPlace(p *smpart.Partition) placement { return placement{place.Green{Part: p}} }

// waits reports the waits for a partition's green contexts; none where
// nothing excludes. WaitStats has smpart.WaitStats's fields.
func (p placement) waits() WaitStats { return WaitStats(p.Waits()) }

// retire keeps a partition for p's spares while p is open and wants its
// size, else closes it; spare is the caller's to keep or close.
func (pl placement) retire(p *Pool) (spare *smpart.Partition, err error) {
	keep := false
	if pl.Partitioned() {
		p.mu.Lock()
		keep = !p.closed && p.spare.Wants(pl.SMs())
		p.mu.Unlock()
	}
	return pl.Retire(keep)
}
