package dorun

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Warming a tenant's contexts: DoEach's runs in a reshapable tenant's
// other sizes (WarmOthers), and the warm-up given at NewTenant
// (fcsp.WithWarmup), which the SDK runs in every context before it
// serves: all of a partitioned tenant's at NewTenant (WarmEvery); for an
// unpartitioned one, the commons' current contexts at NewTenant and after
// each move of the commons (fcsp's member.Rewarm), and, through its
// placement (place.Warming), any the commons makes on demand, in the Do
// that takes it first.

// WarmOthers runs f, as a Do's f, in the contexts of every layout of a
// reshapable tenant but the current one: a Reshape, the controller's
// included, then meets no context made, and no library loading its
// kernels, on a request's path. The caller is in the life lock (Each).
// Its own errors are named as DoEach's; f's are as f returned them.
func WarmOthers[C any](ctx context.Context, t Tenant[C], f func(C) error) error {
	pl := t.Parts().Placement
	if !place.Reshapable(pl) {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ferr error // f's own, which is not the tenant's to name
	err := place.WarmOthers(pl, place.Dos(pl), RunIn(ctx, t, func(cur C) error {
		ferr = f(cur)
		return ferr
	}))
	if err != nil && ferr == nil {
		return t.Fail("DoEach", err) // a context made, swapped or restored
	}
	return err
}

// RunIn is f run as a Do's f in a context it is given (gctx, of sms SMs),
// on the calling thread, which the caller has locked: made current, the
// thread counted inside the tenant's Dos (so f's calls pass a move's
// hold, as a Do's do), the thread's context put back after.
func RunIn[C any](ctx context.Context, t Tenant[C], f func(C) error) func(gctx cuda.Context, sms int) error {
	return func(gctx cuda.Context, sms int) (err error) {
		p := t.Parts()
		prev, thread, err := p.Device.SwapCurrent(gctx)
		if err != nil {
			return err
		}
		defer func() {
			if e := smpart.RestoreCurrent(p.Raw, prev); e != nil {
				err = errors.Join(err, fmt.Errorf("restoring the thread's context: %w", e))
			}
		}()
		slot := p.Threads.Enter(thread)
		defer p.Threads.Exit(slot, thread)
		return f(t.Current(In{Ctx: ctx, Cur: gctx, Slot: slot, Thread: thread, SMs: sms}))
	}
}

// WarmEvery runs a new tenant's warm-up f in every context it may serve
// from (Placement.Warm), in the life lock: a Close (fcsp.WithContext's)
// waits for it, and a move (the controller's) holds it or comes after it.
// A partition's runs are recorded under no id (it is warmed whole, once);
// the commons' under the tenant's (place.Warming.Warm). Its errors are
// bare.
func WarmEvery[C any](t Tenant[C], f func(C) error) error {
	slot, err := t.Enter()
	if err != nil {
		return err
	}
	defer t.Exit(slot)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return t.Parts().Placement.Warm(0, RunIn(context.Background(), t, f))
}

// Warmup is a warm-up function (fcsp.WithWarmup's) made to say failed
// (fcsp.ErrWarmupFailed) and to turn a panic into an error: a warm-up
// that panics fails NewTenant, or its Do, rather than leaving a context
// taken.
func Warmup[C any](f func(C) error, failed error) func(C) error {
	return func(cur C) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: it panicked: %v", failed, r)
			}
		}()
		if err := f(cur); err != nil {
			return fmt.Errorf("%w: %w", failed, err)
		}
		return nil
	}
}
