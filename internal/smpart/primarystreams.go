package smpart

import (
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// NewStream makes a non-blocking stream of the primary context (all SMs:
// an unpartitioned tenant's), or hands back one an earlier owner released
// (ReleaseStream): a server that makes and closes a stream, or a tenant,
// per request then makes no driver call for it.
func (d *Device) NewStream() (cuda.Stream, error) {
	if s, ok, closed := d.idle.Take(); ok {
		return s, nil
	} else if closed {
		return 0, ErrClosed
	}
	return d.drv.StreamCreate(d.Primary(), cuda.StreamNonBlocking)
}

// ReleaseStream waits for a stream NewStream made and keeps it for the next
// NewStream (at most maxIdleStreams), or destroys it.
func (d *Device) ReleaseStream(s cuda.Stream) error { return d.releaseStream(s, true) }

// ReleaseUnused is ReleaseStream for a stream its owner never queued work
// on: nothing to wait for, so no driver call when it is kept.
func (d *Device) ReleaseUnused(s cuda.Stream) error { return d.releaseStream(s, false) }

func (d *Device) releaseStream(s cuda.Stream, wait bool) error {
	ctx := d.Primary()
	if wait {
		if err := d.drv.StreamSynchronize(ctx, s); err != nil {
			return errors.Join(err, d.drv.StreamDestroy(ctx, s)) // a fault: not kept
		}
	}
	if d.idle.Put(s, maxIdleStreams) {
		return nil
	}
	return d.drv.StreamDestroy(ctx, s)
}

// destroyIdle closes the kept streams' list and destroys them.
func (d *Device) destroyIdle() error {
	var err error
	for _, s := range d.idle.Close() {
		if e := d.drv.StreamDestroy(d.Primary(), s); e != nil && err == nil {
			err = e
		}
	}
	return err
}
