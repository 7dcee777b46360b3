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

// StreamQuery is nil once s's work is done (queue.go), unless HoldEvents or
// HoldEventsIn hold s's context, when it answers ErrorNotReady, as it does
// while work issued on s runs or waits. On a capturing stream it fails
// and invalidates the capture, as cuStreamSynchronize does.
func (d *Driver) StreamQuery(c cuda.Context, s cuda.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuStreamQuery"
	if err := d.enterStreamCall(op, c, s); err != nil {
		return err
	}
	st, err := d.stream(op, s)
	if err != nil {
		return err
	}
	if err := refuseCapturing(op, st); err != nil {
		return err
	}
	if d.holdEvents || d.heldCtx[st.ctx] || !idle(st) {
		return cuda.Check(op, cuda.ErrorNotReady)
	}
	d.releaseAboveThreshold()
	return nil
}
