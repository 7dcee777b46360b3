package fcsp

import (
	"context"
)

// Reshape is Tenant.Reshape (its doc says what it keeps, waits for and
// refuses); the steps are the pool's moves' (internal/smmove).
func (c *tenantCore) Reshape(ctx context.Context, sms int) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := c.checkNotInsideDo(); err != nil {
		return err // it would wait for the Do it is called from
	}
	if c.closed.Load() {
		return ErrClosed
	}
	if !c.place.Reshapable() {
		return errNotReshapable
	}
	return c.pool.moves.Reshape(ctx, (*member)(c), sms)
}
