package memtrack

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/shm"
)

var (
	// ErrQuotaExceeded is matched (errors.Is) by every *QuotaError.
	ErrQuotaExceeded = errs.ErrQuotaExceeded
	// ErrUnknownPointer is returned when freeing a pointer that is not a
	// live allocation of the account: never recorded, already freed, or
	// owned by another account.
	ErrUnknownPointer = errors.New("unknown device pointer")
	// ErrInvalidSize is returned for zero-byte requests and for sizes that
	// cannot be represented.
	// It also matches ErrInvalidArgument.
	ErrInvalidSize = errs.New("invalid allocation size", errs.ErrInvalidArgument)
	// ErrClosed is returned by operations on a closed Account; it is the
	// module's one ErrClosed (fcsp.ErrClosed, greenctx.ErrClosed, ...).
	ErrClosed = errs.ErrClosed
	// ErrInvalidLimit is returned for a zero limit. It also matches
	// ErrInvalidArgument.
	ErrInvalidLimit = errs.New("invalid memory limit", errs.ErrInvalidArgument)
	// ErrInvalidArgument is the module's one identity for bad input
	// (fcsp.ErrInvalidArgument); ErrInvalidSize and ErrInvalidLimit match it.
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrReaped is returned by Reserve once the process's slot of the
	// shared region was reaped (see WithShared); it is shm.ErrReaped.
	ErrReaped = shm.ErrReaped
	// ErrTooManyAccounts is returned by NewAccount when every account id
	// of the tracker is in use.
	ErrTooManyAccounts = errors.New("too many open accounts")
)

// Scopes reported by QuotaError.Scope.
const (
	ScopeTenant = "tenant"
	ScopeDevice = "device"
)

// QuotaError describes a rejected reservation. Used and Limit are those of
// the scope (tenant or device) whose limit would have been passed, as
// observed at the moment of rejection. Its text leaves the tenant out, as
// every error of an Account does (the caller names it).
type QuotaError struct {
	Tenant    string
	Requested uint64
	Used      uint64
	Limit     uint64
	Scope     string // ScopeTenant or ScopeDevice
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("requested %d bytes with %d of %d bytes used would exceed the %s limit (at most %d more bytes available)",
		e.Requested, e.Used, e.Limit, e.Scope, sat(e.Limit, e.Used))
}

// Unwrap returns ErrQuotaExceeded.
func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// Is reports whether target is ErrQuotaExceeded.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }

// sat returns a-b, or 0 if b > a.
func sat(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
