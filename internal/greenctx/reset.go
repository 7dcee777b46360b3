package greenctx

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
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
	if p.lost {
		return nil // already abandoned
	}
	var errs []error
	for _, l := range p.layouts {
		errs = append(errs, p.drv.GreenCtxDestroy(l.green))
		l.green, l.ctx, l.streams, l.events = 0, 0, nil, nil
	}
	p.lost = true
	p.shut.Store(true) // slots refuse until Rebuild
	return errors.Join(errs...)
}

// Rebuild makes the green contexts of an abandoned partition anew (each of
// its layouts) over the same groups, with a new first stream each.
func (p *Partition) Rebuild() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if !p.lost {
		return fmt.Errorf("greenctx: Rebuild of %v, which was not abandoned", p)
	}
	for _, l := range p.layouts {
		if l.green != 0 {
			continue // rebuilt by an earlier, failed Rebuild
		}
		q, err := newLayout(p.dev, l.res)
		if err != nil {
			return err
		}
		if q.sms != l.sms {
			return errors.Join(fmt.Errorf("greenctx: rebuilt partition has %d SMs, had %d", q.sms, l.sms), q.destroy(p.drv, p.dev.Primary()))
		}
		if p.shape != nil {
			e, err := p.drv.EventCreate(q.ctx, cuda.EventDisableTiming)
			if err != nil {
				return errors.Join(err, q.destroy(p.drv, p.dev.Primary()))
			}
			q.events = []cuda.Event{e}
		}
		l.green, l.ctx, l.streams, l.events = q.green, q.ctx, q.streams, q.events
	}
	p.lost = false
	p.shut.Store(p.closed)
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
