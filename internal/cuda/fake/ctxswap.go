package fake

import (
	"golang.org/x/sys/unix"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// entry points added for dofast.

// CtxSwapCurrent is the real shim's composite: cuCtxGetCurrent, then
// cuCtxSetCurrent unless ctx is current already. Each counts (Calls) and
// fails (FailNext) under its own name, as the driver sees them.
func (d *Driver) CtxSwapCurrent(ctx cuda.Context) (cuda.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	me := unix.Gettid()
	prev, err := d.getCurrent(me)
	if err != nil || prev == ctx {
		return prev, err
	}
	if err := d.setCurrent(ctx, me); err != nil {
		return 0, err
	}
	return prev, nil
}
