package tokenbucket

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig is matched (errors.Is) by every error New, NewBucket,
	// NewStream, SetRate and SetSMLimit return for bad input.
	ErrInvalidConfig = errors.New("tokenbucket: invalid config")
	// ErrInvalidAmount is returned by Wait for a token count that is NaN or
	// infinite.
	ErrInvalidAmount = errors.New("tokenbucket: token count must be finite")
	// ErrClosed is returned by Stream.Wait after Stream.Close.
	ErrClosed = errors.New("tokenbucket: stream closed")
	// ErrReservationUsed is returned by Reservation.Wait on a reservation
	// already used or cancelled.
	ErrReservationUsed = errors.New("tokenbucket: reservation already used or cancelled")
)

// invalid builds an error naming the field, the value it had and what is
// allowed, so a caller can fix a config without reading this package.
func invalid(field string, value any, allowed string) error {
	return fmt.Errorf("%w: %s = %v, want %s", ErrInvalidConfig, field, value, allowed)
}
