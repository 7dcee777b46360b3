package fcsp

import (
	"context"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/dorun"
)

// DoEach is Tenant.DoEach; the runs are internal/dorun's.
func (c *tenantCore) DoEach(ctx context.Context, f func(Current) error) error {
	if f == nil {
		return c.fail("DoEach", errNilFunc)
	}
	if err := ctxErr(ctx); err != nil {
		return c.fail("DoEach", err)
	}
	if err := c.checkNotInsideDo(); err != nil {
		return c.fail("DoEach", err) // its runs would wait for the context this Do holds
	}
	err := dorun.Each(ctx, (*host)(c), f)
	runtime.KeepAlive(c)
	return err
}
