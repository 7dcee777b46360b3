package fcsp

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// warmOthers runs f, as a Do's f, in the contexts of every layout of a
// reshapable tenant but the current one (greenctx.Partition.WarmOthers):
// a Reshape, the controller's included, then meets no context made, and no
// library loading its kernels, on a request's path. The caller is in the
// life lock (DoEach).
func (c *tenantCore) warmOthers(ctx context.Context, f func(Current) error) error {
	g, ok := c.place.Placement.(place.Green)
	if !ok || !g.Part.Reshapable() {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ferr error // f's own, which is not the tenant's to name
	err := g.Part.WarmOthers(c.place.Dos(), func(gctx cuda.Context, sms int) (err error) {
		prev, thread, err := c.pool.dev.SwapCurrent(gctx)
		if err != nil {
			return err
		}
		defer func() {
			if e := greenctx.RestoreCurrent(c.pool.raw, prev); e != nil {
				err = errors.Join(err, fmt.Errorf("restoring the thread's context: %w", e))
			}
		}()
		slot := c.dos.Enter(thread)
		defer c.dos.Exit(slot, thread)
		ferr = f(Current{t: c, ctx: ctx, gctx: gctx, slot: slot, thread: thread, sms: sms})
		return ferr
	})
	if err != nil && ferr == nil {
		return c.fail("DoEach", err) // a context made, swapped or restored
	}
	return err
}
