package fcsp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Warming a tenant's contexts: DoEach's runs in a reshapable tenant's
// other sizes (warmOthers), and the warm-up given at NewTenant
// (WithWarmup), which the SDK runs in every context before it serves:
// all of a partitioned tenant's at NewTenant; for an unpartitioned one,
// the commons' current contexts at NewTenant and after each move of the
// commons (member.Rewarm), and, through its placement (place.Warming),
// any the commons makes on demand, in the Do that takes it first.

// warmOthers runs f, as a Do's f, in the contexts of every layout of a
// reshapable tenant but the current one: a Reshape, the controller's
// included, then meets no context made, and no library loading its
// kernels, on a request's path. The caller is in the life lock (DoEach).
func (c *tenantCore) warmOthers(ctx context.Context, f func(Current) error) error {
	if !c.place.Reshapable() {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ferr error // f's own, which is not the tenant's to name
	err := place.WarmOthers(c.place.Placement, c.place.Dos(), c.runIn(ctx, func(cur Current) error {
		ferr = f(cur)
		return ferr
	}))
	if err != nil && ferr == nil {
		return c.fail("DoEach", err) // a context made, swapped or restored
	}
	return err
}

// runIn is f run as a Do's f in a context it is given (gctx, of sms SMs),
// on the calling thread, which the caller has locked: made current, the
// thread counted inside the tenant's Dos (so f's calls pass a move's
// hold, as a Do's do), the thread's context put back after.
func (c *tenantCore) runIn(ctx context.Context, f func(Current) error) func(gctx cuda.Context, sms int) error {
	return func(gctx cuda.Context, sms int) (err error) {
		prev, thread, err := c.pool.dev.SwapCurrent(gctx)
		if err != nil {
			return err
		}
		defer func() {
			if e := smpart.RestoreCurrent(c.pool.raw, prev); e != nil {
				err = errors.Join(err, fmt.Errorf("restoring the thread's context: %w", e))
			}
		}()
		slot := c.dos.Enter(thread)
		defer c.dos.Exit(slot, thread)
		return f(Current{t: c, ctx: ctx, gctx: gctx, slot: slot, thread: thread, sms: sms})
	}
}

// warmIDs numbers the warm-ups, as the commons' contexts record them.
var warmIDs atomic.Uint64

// warmupOf is WithWarmup's function, made to say ErrWarmupFailed and to
// turn a panic into an error (a warm-up that panics fails NewTenant, or
// its Do, rather than leaving a context taken); nil without one. The
// tenant keeps it nowhere but in its placement where it needs it later
// (place.Warming): a field more would cost every tenant made 32 bytes.
func warmupOf(cfg *tenantConfig) func(Current) error {
	f, ok := cfg.Warm.(func(Current) error)
	if !ok || f == nil {
		return nil
	}
	return func(cur Current) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: it panicked: %v", ErrWarmupFailed, r)
			}
		}()
		if err := f(cur); err != nil {
			return fmt.Errorf("%w: %w", ErrWarmupFailed, err)
		}
		return nil
	}
}

// plainFor is an unpartitioned tenant's placement: the pool's, or, for a
// tenant with a warm-up on the commons, the commons warming each context
// before it serves the tenant (place.NewWarming). Chosen once, here.
func (p *Pool) plainFor(c *tenantCore, cfg *tenantConfig) placement {
	f := warmupOf(cfg)
	if f == nil {
		return p.plain
	}
	return placement{place.NewWarming(p.plain.Placement, warmIDs.Add(1), c.runIn(context.Background(), f))}
}

// warmUp runs a new tenant's warm-up (cfg's) in every context it may serve
// from (placement.Warm), once NewTenant has made it (err nil) and before
// it is handed out. A failure closes the tenant: nothing it took stays
// taken. Its errors are bare: NewTenant names the tenant.
func (p *Pool) warmUp(t *Tenant, err error, cfg *tenantConfig) (*Tenant, error) {
	if err != nil || cfg.Warm == nil {
		return t, err
	}
	c := t.c
	if err := c.warmEvery(warmupOf(cfg)); errors.Is(err, ErrClosed) && c.closed.Load() {
		return t, nil // closed as it was made (WithContext's ctx was done), as without a warm-up
	} else if err != nil {
		c.cleanup.Stop()
		return nil, errors.Join(err, c.close("NewTenant: its warm-up failed"))
	}
	return t, nil
}

// warmEvery is warmUp's run of f, in the life lock: a Close (WithContext's)
// waits for it, and a move (the controller's) holds it or comes after it.
// A partition's runs are recorded under no id (it is warmed whole, once);
// the commons' under the tenant's (place.Warming.Warm).
func (c *tenantCore) warmEvery(f func(Current) error) error {
	return c.call(func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return c.place.Warm(0, c.runIn(context.Background(), f))
	})
}
