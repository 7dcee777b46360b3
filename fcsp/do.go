package fcsp

import (
	"context"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/dorun"
)

// Do is Tenant.Do.
func (c *tenantCore) Do(ctx context.Context, f func(Current) error) error {
	return c.runDo(ctx, f, false)
}

// TryDo is Do without waiting for GPU-share tokens: under WithGPUShare, if
// the tenant's bucket does not hold f's predicted cost now, it returns
// ErrThrottled, charging nothing and not running f. It still waits, as Do,
// for a partitioned tenant's exclusion (ctx ends that wait). Without a GPU
// share it is Do.
func (t *Tenant) TryDo(ctx context.Context, f func(Current) error) error {
	defer runtime.KeepAlive(t)
	return t.c.runDo(ctx, f, true)
}

// runDo is Do, or with try TryDo; the run is internal/dorun's.
func (c *tenantCore) runDo(ctx context.Context, f func(Current) error, try bool) error {
	op := "Do"
	if try {
		op = "TryDo"
	}
	if f == nil {
		return c.fail(op, errNilFunc)
	}
	if err := ctxErr(ctx); err != nil {
		return c.fail(op, err)
	}
	return dorun.Do(ctx, (*host)(c), op, f, try)
}

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
	return dorun.Each(ctx, (*host)(c), f)
}

// doOnThread is a Do's run for a caller counted in the life lock already
// (dorun.OnThread says what it takes and how it names its errors): the
// tenant's close, running OnClose's functions.
func (c *tenantCore) doOnThread(ctx context.Context, op string, f func(Current) error, run *admission.Run, ownRun bool) error {
	return dorun.OnThread(ctx, (*host)(c), op, f, run, ownRun)
}

// The tenant as its Dos see it (dorun.Tenant) is host, the conversion of
// the core's pointer its other engines see: its Enter and Exit, and these.
func (h *host) Fail(op string, err error) error { return (*tenantCore)(h).fail(op, err) }
func (h *host) Current(in dorun.In) Current     { return Current{t: (*tenantCore)(h), in: in} }
func (h *host) Parts() dorun.Parts {
	return dorun.Parts{Placement: h.place.Placement, Threads: &h.dos, Admission: h.adm, Device: h.pool.dev, Raw: h.pool.raw}
}

// ctxErr is what a call given a context checks first: errNilContext for a
// nil one, else the context's error once it has ended.
func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	return ctx.Err()
}

// checkNotInsideDo refuses what would wait for the tenant's Dos to end
// from inside one, where it would wait for itself
// (inside.Threads.NotInside); its error is bare.
func (c *tenantCore) checkNotInsideDo() error { return c.dos.NotInside() }
