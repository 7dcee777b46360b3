// Package config holds what fcsp's options chose for a pool (Pool) and for
// a tenant (Tenant), and the rules on it: each option's range check is a
// setter here, and the rules between options (one way of asking for SMs,
// a floor only on a GPU-time bucket, the node's CUDA_DEVICE_SM_LIMIT) are
// Tenant.Resolve. fcsp's options are the setters' public face (fcsp's
// Option and TenantOption are functions of *Pool and *Tenant); fcsp reads
// the fields to compose the pool and its tenants, and decides nothing
// about them itself.
//
// Every error matches errs.ErrInvalidArgument (fcsp.ErrInvalidArgument)
// and says what was wrong and what is allowed.
package config

import (
	"fmt"
	"math"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Apply runs opts on c in order and stops at the first error; fn gives an
// option's function (fcsp's options are opaque structs), and an option
// without one (the zero value) is refused, named by its index (the caller
// names the call: fcsp's TenantError for NewTenant).
func Apply[T, O any](c *T, opts []O, fn func(O) func(*T) error) error {
	for i, o := range opts {
		f := fn(o)
		if f == nil {
			return fmt.Errorf("%w: option %d is the zero value; pass the options fcsp's With functions make", errs.ErrInvalidArgument, i)
		}
		if err := f(c); err != nil {
			return err
		}
	}
	return nil
}

// invalid is an ErrInvalidArgument error with its message.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errs.ErrInvalidArgument}, args...)...)
}

// fraction refuses f outside (0, 1] (NaN included); what names it.
func fraction(what string, f float64) error {
	if math.IsNaN(f) || f <= 0 || f > 1 {
		return invalid("%s %v; want a fraction in (0, 1]", what, f)
	}
	return nil
}

// positive refuses SM counts below 1; what names them ("prewarm size").
func positive(what string, sms []int) error {
	for _, n := range sms {
		if n <= 0 {
			return invalid("%s %d SMs; want positive SM counts", what, n)
		}
	}
	return nil
}
