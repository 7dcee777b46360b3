package greenctx

import (
	"errors"
	"fmt"
)

// After a sticky device error (an illegal address in any kernel of the
// process) every context of the device answers that error until the
// primary context is reset. Recovery is Abandon on every partition,
// ResetPrimary, then Rebuild on every partition: the partitions keep their
// groups of the one split, so they come back disjoint and the same size.

// Abandon destroys the partition's green context and forgets its streams,
// which died with it; the partition keeps its groups. Calls other than
// Rebuild and Close fail with ErrClosed until Rebuild. The driver's error
// (a poisoned context may answer one) is returned, for the log.
func (p *Partition) Abandon() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.green == 0 {
		return nil // already abandoned
	}
	err := p.drv.GreenCtxDestroy(p.green)
	p.green, p.ctx, p.stream, p.streams = 0, 0, 0, nil
	return err
}

// Rebuild makes the green context of an abandoned partition anew over the
// same groups, with a new first stream.
func (p *Partition) Rebuild() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.green != 0 {
		return fmt.Errorf("greenctx: Rebuild of %v, which was not abandoned", p)
	}
	q, err := newPartition(p.dev, p.res)
	if err != nil {
		return err
	}
	if q.sms != p.sms {
		return errors.Join(fmt.Errorf("greenctx: rebuilt partition has %d SMs, had %d", q.sms, p.sms), p.drv.GreenCtxDestroy(q.green))
	}
	p.green, p.ctx, p.stream = q.green, q.ctx, q.stream
	return nil
}

// ResetPrimary resets the device's primary context
// (cuDevicePrimaryCtxReset_v2): every allocation, stream, event, module and
// pool of the process on this device is destroyed and a sticky error is
// cleared. The context is retained anew, since its handle may change. Every
// partition must be abandoned first.
func (d *Device) ResetPrimary() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if err := d.drv.PrimaryCtxReset(d.dev); err != nil {
		return err
	}
	c, err := d.drv.PrimaryCtxRetain(d.dev)
	if err != nil {
		return err
	}
	// Retained once at Open: keep exactly that one reference.
	if err := d.drv.PrimaryCtxRelease(d.dev); err != nil {
		return err
	}
	d.primary.Store(uintptr(c))
	return nil
}
