package fcsp

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// warmOthers runs f, as a Do's f, in the contexts of every layout of a
// reshapable tenant but the current one (smpart.Partition.WarmOthers):
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
	return g.Part.WarmOthers(c.place.Dos(), func(gctx cuda.Context, sms int) (err error) {
		prev, thread, err := c.pool.dev.SwapCurrent(gctx)
		if err != nil {
			return err
		}
		defer func() {
			if e := smpart.RestoreCurrent(c.pool.raw, prev); e != nil {
				err = errors.Join(err, fmt.Errorf("tenant %q: restoring the thread's context: %w", c.name, e))
			}
		}()
		slot := c.dos.Enter(thread)
		defer c.dos.Exit(slot, thread)
		return f(Current{t: c, ctx: ctx, gctx: gctx, slot: slot, thread: thread, sms: sms})
	})
}
