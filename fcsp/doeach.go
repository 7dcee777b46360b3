package fcsp

import (
	"context"
	"fmt"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/inside"
)

// DoEach is Tenant.DoEach.
func (c *tenantCore) DoEach(ctx context.Context, f func(Current) error) error {
	if f == nil {
		return fmt.Errorf("%w: DoEach with a nil function", ErrInvalidArgument)
	}
	if ctx == nil {
		return fmt.Errorf("%w: DoEach with a nil context", ErrInvalidArgument)
	}
	if err := c.checkNotInsideDo("DoEach"); err != nil {
		return err // its runs would wait for the context this Do holds
	}
	// Each run holds its context until all have run (inside.Each).
	err := inside.Each(ctx, c.place.Dos(), c.Do, f)
	runtime.KeepAlive(c)
	return err
}
