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

// charge prices j and takes the price from b as how says; with ahead it
// also returns the reservation. On error nothing was taken.
func (t *Tenant) charge(ctx context.Context, how take, b *tokenbucket.Stream, j job) (charge, *tokenbucket.Reservation, error) {
	var c charge
	var r *tokenbucket.Reservation
	switch how {
	case now:
		if c = quote(t.price, b, j); !b.TryAcquire(c.total()) {
			if t.cfg.Closed() {
				return charge{}, nil, errs.ErrClosed
			}
			return charge{}, nil, errs.ErrThrottled
		}
	case ahead:
		c = quote(t.price, b, j)
		if r = b.Reserve(c.total()); !r.OK() {
			return charge{}, nil, errs.ErrClosed
		}
	default:
		var err error
		if c, err = t.wait.wait(ctx, t.price, b, j); err != nil {
			return charge{}, nil, closedErr(err)
		}
	}
	if c.floor > 0 && j.launch {
		t.floored.Add(1) // a launch admitted at the floor
	}
	return c, r, nil
}
