package devmem

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Alloc is a.Alloc for a caller not counted in the tenant's life lock
// (fcsp's Tenant.Alloc and AllocAsync, a Scope's, a Workspace's): it
// checks n, then counts itself in (Owner.Enter) from the quota check to
// the record, so that a Close that races it (a tenant ended by its
// context while a request allocates) waits, then frees what it recorded:
// nothing is lost. Its errors are bare: the caller names the tenant.
func Alloc(a Allocator, s Stream, n uint64) (cuda.DevicePtr, error) {
	if n == 0 {
		return 0, fmt.Errorf("%w: 0 bytes; ask for at least 1", errs.ErrInvalidArgument)
	}
	o := a.Ops().Owner
	tok, err := o.Enter()
	if err != nil {
		return 0, err
	}
	defer o.Exit(tok)
	return a.Alloc(s, n)
}

// Free is a.Free for a caller not counted in the tenant's life lock,
// counted in as Alloc is. A pointer the tenant's account does not hold is
// memtrack.ErrUnknownPointer in the tenant's words: memtrack's are its
// accounts'.
func Free(a Allocator, s Stream, p cuda.DevicePtr) error {
	o := a.Ops().Owner
	tok, err := o.Enter()
	if err != nil {
		return err
	}
	defer o.Exit(tok)
	err = a.Free(s, p)
	if errors.Is(err, memtrack.ErrUnknownPointer) {
		return fmt.Errorf("%w: %#x is not a live allocation of this tenant (allocated by another, or freed already)", memtrack.ErrUnknownPointer, uint64(p))
	}
	return err
}
