package fake

import (
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// entry points added for share

// DurationFunc models how long a kernel runs on the GPU for one launch.
type DurationFunc func(grid, block cuda.Dim3) time.Duration

// SetKernelDuration gives the kernel called name a modelled run time. Each
// stream keeps a GPU clock of its own that a launch of the kernel advances
// by that much; events recorded on the stream read it. While any kernel has
// a duration, EventElapsedMs between two events of one stream is the
// modelled time of the kernels between them (deterministic); otherwise it
// is wall time. nil removes the model.
func (d *Driver) SetKernelDuration(name string, f DurationFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.durations == nil {
		d.durations = map[string]DurationFunc{}
	}
	if f == nil {
		delete(d.durations, name)
		return
	}
	d.durations[name] = f
}

// HoldEvents makes EventQuery answer ErrorNotReady for every event while
// hold is true, as a real GPU does for work still queued, so that tests
// can check nothing on the launch path waits for an event.
func (d *Driver) HoldEvents(hold bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holdEvents = hold
}

// EventQuery is nil once the work before the event's last record is done
// (queue.go), and HoldEvents or HoldEventsIn do not hold it.
func (d *Driver) EventQuery(c cuda.Context, e cuda.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuEventQuery"
	if c != 0 {
		if _, err := d.ctx(op, c); err != nil {
			return err
		}
	} else if err := d.enter(op); err != nil {
		return err
	}
	ev, err := d.event(op, e)
	if err != nil {
		return err
	}
	if d.holdEvents || d.heldCtx[ev.ctx] || d.heldCtx[ev.on] || !ev.rec.reached() {
		return cuda.Check(op, cuda.ErrorNotReady)
	}
	return nil
}

// modelLaunch advances s's GPU clock by fn's modelled duration. Called with
// d.mu held.
func (d *Driver) modelLaunch(st *streamInfo, name string, grid, block cuda.Dim3) {
	if f := d.durations[name]; f != nil {
		st.gpu += f(grid, block)
	}
}
