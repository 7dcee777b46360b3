package fake

import "github.com/fcsp-go/fcsp-go/internal/cuda"

// entry points added for bw

// HoldEventsIn makes EventQuery answer ErrorNotReady for the events made in
// context c, or recorded on one of its streams, while hold is true: one tenant's work seems to be still running
// on the GPU while everyone else's completes.
func (d *Driver) HoldEventsIn(c cuda.Context, hold bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.heldCtx == nil {
		d.heldCtx = map[cuda.Context]bool{}
	}
	if hold {
		d.heldCtx[c] = true
	} else {
		delete(d.heldCtx, c)
	}
}
