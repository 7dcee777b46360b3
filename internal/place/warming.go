package place

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Warming is the commons (Commons) for a tenant with a warm-up
// (fcsp.WithWarmup): the commons' contexts are shared with the other
// unpartitioned tenants and made on demand, so one may reach a Do of this
// tenant before its warm-up ran there (made by another tenant's Do, or
// held by one while this tenant's were warmed). Take runs the warm-up in
// such a context before handing it out. Chosen once, at NewTenant, for
// the tenants with a warm-up: the others' Take is the commons' own.
type Warming struct {
	Commons
	ID  uint64                                // the warm-up's, as the slots record it
	Run func(ctx cuda.Context, sms int) error // the warm-up, run with ctx current on the locked thread
}

// Take is Commons.Take, then the warm-up where it has not run in the
// context taken. Its error gives the context back.
func (w Warming) Take(ctx context.Context) (Taken, error) {
	t, err := w.Commons.Take(ctx)
	if err != nil || t.Slot == nil || t.Nested {
		return t, err
	}
	if err := t.Slot.WarmOnce(w.ID, w.Run); err != nil {
		t.Slot.Release()
		return Taken{}, fmt.Errorf("warming a context of the %d-SM layout: %w", t.Slot.SMs(), err)
	}
	return t, nil
}

// Warm is Commons.Warm recorded under the tenant's warm-up's id, whatever
// the caller's, so that Take knows the contexts warmed.
func (w Warming) Warm(_ uint64, f func(ctx cuda.Context, sms int) error) error {
	return w.Commons.Warm(w.ID, f)
}

// Rewarm runs the warm-up in the commons' contexts after a move, on a
// thread of its own (locked here); a failure leaves the context for the
// next Do there to warm (Take).
func (w Warming) Rewarm() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return w.Warm(0, w.Run)
}

// NewWarming is pl with a warm-up: for the commons, Warming, which runs it
// in each context before a Do of the tenant there, numbered (warmIDs) as
// the commons' contexts record it; any other placement is warmed whole
// when the tenant is made, and is returned as it is.
func NewWarming(pl Placement, run func(ctx cuda.Context, sms int) error) Placement {
	if c, ok := pl.(Commons); ok {
		return Warming{Commons: c, ID: warmIDs.Add(1), Run: run}
	}
	return pl
}

// warmIDs numbers the warm-ups, as the commons' contexts record them.
var warmIDs atomic.Uint64

// Leave forgets the warm-up in every context of the commons, which
// outlives the tenant (Retire).
func (w Warming) Leave() { w.Part.Forget(w.ID) }
