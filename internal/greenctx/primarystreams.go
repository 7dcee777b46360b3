package greenctx

import (
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// NewStream makes a non-blocking stream of the primary context (all SMs:
// an unpartitioned tenant's), or hands back one an earlier owner released
// (ReleaseStream): a server that makes and closes a stream, or a tenant,
// per request then makes no driver call for it.
func (d *Device) NewStream() (cuda.Stream, error) {
	d.mu.Lock()
	if n := len(d.idle); n > 0 && !d.closed {
		s := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.mu.Unlock()
		return s, nil
	}
	closed := d.closed
	d.mu.Unlock()
	if closed {
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
	d.mu.Lock()
	if !d.closed && len(d.idle) < maxIdleStreams {
		d.idle = append(d.idle, s)
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	return d.drv.StreamDestroy(ctx, s)
}

// destroyIdle destroys the kept streams; the caller holds d.mu.
func (d *Device) destroyIdle() error {
	var err error
	for _, s := range d.idle {
		if e := d.drv.StreamDestroy(d.Primary(), s); e != nil && err == nil {
			err = e
		}
	}
	d.idle = nil
	return err
}
