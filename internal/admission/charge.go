package admission

import (
	"context"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// The one charge path: every admission (Gate's Admit, TryAdmit, Reserve
// and AdmitGraph, and Tenant.BeginDo) is priced by its tenant's pricer
// (quote) and takes the price from its bucket as its entry point says:
// waiting through its tenant's waiter, at once, or ahead.

// take is how an admission takes its price.
type take uint8

const (
	await take = iota // Admit, AdmitGraph, BeginDo: wait until the tokens are due
	now               // TryAdmit, BeginDo's try: at once, or ErrThrottled
	ahead             // Reserve: at once, going into debt (Reservation)
)

// charge prices j into *c and takes the price from b as how says; with
// ahead it also returns the reservation. Work that need not wait is taken
// here, on the caller's *c: the waiter, behind its interface, is asked
// only to wait (its charge copied back once). On error *c is zero:
// nothing was taken.
func (t *Tenant) charge(ctx context.Context, how take, b *tokenbucket.Stream, j job, c *charge) (*tokenbucket.Reservation, error) {
	quote(t.price, b, j, c)
	var r *tokenbucket.Reservation
	switch {
	case how == ahead:
		if r = b.Reserve(c.total()); !r.OK() {
			*c = charge{}
			return nil, errs.ErrClosed
		}
		c.mark = r.Mark()
	case b.TryAcquireMark(c.total(), &c.mark):
	case how == now:
		*c = charge{}
		if t.cfg.Closed() {
			return nil, errs.ErrClosed
		}
		return nil, errs.ErrThrottled
	default:
		w, err := t.wait.wait(ctx, t.price, b, j)
		if err != nil {
			*c = charge{}
			return nil, err // tokenbucket.ErrClosed is errs.ErrClosed: one identity
		}
		*c = w // after a wait: a copy's stall is nothing beside it
	}
	if c.floor > 0 && j.launch {
		t.floored.Add(1) // a launch admitted at the floor
	}
	return r, nil
}
