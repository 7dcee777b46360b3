package tokenbucket

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

var (
	// ErrInvalidConfig is matched (errors.Is) by every error New, NewBucket,
	// NewStream, SetRate and SetSMLimit return for bad input.
	// It also matches ErrInvalidArgument.
	ErrInvalidConfig = errs.New("invalid limiter config", errs.ErrInvalidArgument)
	// ErrInvalidAmount is returned by Wait for a token count that is NaN or
	// infinite. It also matches ErrInvalidArgument.
	ErrInvalidAmount = errs.New("token count must be finite", errs.ErrInvalidArgument)
	// ErrClosed is returned by Stream.Wait after Stream.Close; it is the
	// module's one ErrClosed (fcsp.ErrClosed, greenctx.ErrClosed, ...).
	ErrClosed = errs.ErrClosed
	// ErrInvalidArgument is the module's one identity for bad input
	// (fcsp.ErrInvalidArgument); ErrInvalidConfig and ErrInvalidAmount match
	// it.
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrLimitChanged is returned by Waiting.Wait, having taken nothing,
	// when the limiter changed (its SM limit, its size, or its streams)
	// since the Mark the cost was priced under: price it again.
	ErrLimitChanged = errors.New("limiter changed since the price's mark")
	// ErrReservationUsed is returned by Reservation.Wait on a reservation
	// already used or cancelled.
	ErrReservationUsed = errors.New("reservation already used or cancelled")
)

// invalid builds an error naming the field, the value it had and what is
// allowed, so a caller can fix a config without reading this package.
func invalid(field string, value any, allowed string) error {
	return fmt.Errorf("%w: %s = %v, want %s", ErrInvalidConfig, field, value, allowed)
}
