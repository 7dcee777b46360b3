package fcsp

import (
	"context"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// placement is where a tenant's work runs, chosen once in NewTenant
// (internal/place says what each method means): a partition of the
// device's SMs (greenPlace), or the whole device shared through its primary
// context (devicePlace). Its methods keep the names the package calls them
// by; what needs the Pool or a public type is converted here.
type placement struct{ place.Placement }

func devicePlace(dev *greenctx.Device, sms int) placement {
	return placement{place.Whole{Dev: dev, N: sms}}
}

func greenPlace(p *greenctx.Partition) placement { return placement{place.Green{Part: p}} }

func (p placement) sms() int                        { return p.SMs() }
func (p placement) partitioned() bool               { return p.Partitioned() }
func (p placement) context() cuda.Context           { return p.Context() }
func (p placement) anyThread() cuda.Context         { return p.AnyThread() }
func (p placement) isContext(ctx cuda.Context) bool { return p.IsContext(ctx) }
func (p placement) reshapable() bool                { return p.Reshapable() }
func (p placement) layout() int                     { return p.Layout() }
func (p placement) sizes() []int                    { return p.Sizes() }
func (p placement) close() error                    { return p.Close() }

func (p placement) newStream(first bool) (cuda.Stream, bool, error) { return p.NewStream(first) }
func (p placement) destroyStream(h cuda.Stream, unused bool) error  { return p.DestroyStream(h, unused) }
func (p placement) doGreen(f func(ctx cuda.Context) error) error    { return p.DoGreen(f) }

func (p placement) reshape(sms int, swap func(old, new cuda.Stream)) error {
	return p.Reshape(sms, swap)
}

func (p placement) acquire(ctx context.Context) (*greenctx.Slot, cuda.Context, error) {
	return p.Acquire(ctx)
}

// waits reports the waits for a partition's green contexts; none where
// nothing excludes. WaitStats has greenctx.WaitStats's fields.
func (p placement) waits() WaitStats { return WaitStats(p.Waits()) }

// retire keeps a partition for p's spares while p is open and wants its
// size, else closes it; spare is the caller's to keep or close.
func (pl placement) retire(p *Pool) (spare *greenctx.Partition, err error) {
	keep := false
	if pl.partitioned() {
		p.mu.Lock()
		keep = !p.closed && p.spare.Wants(pl.sms())
		p.mu.Unlock()
	}
	return pl.Retire(keep)
}
