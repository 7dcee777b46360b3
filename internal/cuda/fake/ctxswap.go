package fake

import (
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
)

// entry points added for dofast.

// CtxSwapCurrent is the real shim's composite: cuCtxGetCurrent, then
// cuCtxSetCurrent unless ctx is current already, and the thread's id. Each
// counts (Calls) and fails (FailNext) under its own name, as the driver
// sees them.
func (d *Driver) CtxSwapCurrent(ctx cuda.Context) (prev cuda.Context, thread int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	me := osthread.ID()
	if prev, err = d.getCurrent(me); err != nil {
		return 0, 0, err
	}
	if prev != ctx {
		if err := d.setCurrent(ctx, me); err != nil {
			return 0, 0, err
		}
	}
	return prev, me, nil
}
