package fcsp

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/place"
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

// runDo is Do, or with try TryDo.
func (c *tenantCore) runDo(ctx context.Context, f func(Current) error, try bool) error {
	op := "Do"
	if try {
		op = "TryDo"
	}
	if f == nil {
		return c.fail(op, errNilFunc)
	}
	if ctx == nil {
		return c.fail(op, errNilContext)
	}
	if err := ctx.Err(); err != nil {
		return c.fail(op, err)
	}
	// Metered: admitted (under a GPU share) before anything is held, so a
	// Do waiting for tokens holds nothing, and a Reshape that holds new
	// calls back (its admission's included) waits for no Do of this one.
	var run *admission.Run
	ownRun := false
	if c.adm.Metered() { // a call the unmetered Do skips (BenchmarkDo on the H200)
		var err error
		if run, ownRun, err = c.adm.BeginDo(ctx, admission.FuncKey(f), try); err != nil {
			return c.fail(op, err)
		}
	}
	// Counted in the life lock: Close waits for f instead of destroying the
	// context under it.
	slot, err := c.enter()
	if err != nil {
		if ownRun {
			run.Abandon()
		}
		return c.fail(op, err)
	}
	defer c.life.Exit(slot)
	return c.doOnThread(ctx, op, f, run, ownRun)
}

// doOnThread is Do from taking the thread on (a place.Frame: lock the
// thread, take a context, make it current, count the thread inside). Its
// undoing is one deferred call (unwind) rather than one defer per
// step: with few defers and returns the compiler open-codes it, where five
// stack-allocated defers each cost a record and their unwinding a walk
// (BenchmarkDoCgo). Its own errors are named with op (TenantError), f's
// are returned as they are; op "" leaves its own bare too, for a caller
// that names them (the tenant's close, running OnClose's functions).
func (c *tenantCore) doOnThread(ctx context.Context, op string, f func(Current) error, run *admission.Run, ownRun bool) (err error) {
	var fr place.Frame
	var started *admission.Run // a metered run whose brackets are to close
	defer c.unwind(op, &fr, &started, &err)
	// A partitioned tenant's Do holds one of its green contexts (a slot,
	// internal/smpart/slots.go) while that context is current (internal/place);
	// an unpartitioned tenant's takes the primary context, holding nothing.
	if err := fr.Take(ctx, c.place.Placement); err != nil {
		if ownRun {
			run.Abandon()
		}
		return c.doFail(op, err)
	}
	if err := fr.Swap(c.pool.dev, &c.dos); err != nil {
		return c.doFail(op, err)
	}
	if ownRun {
		started = run
		if err := run.Start(fr.Thread, fr.Cur); err != nil {
			return c.doFail(op, fmt.Errorf("timing its streams: %w", err))
		}
	}
	return f(Current{t: c, ctx: ctx, run: run, gctx: fr.Cur, slot: fr.Slot, thread: fr.Thread})
}

// unwind gives back what doOnThread has taken, in the reverse order of
// taking, also when f panics: the run's brackets close on this thread with
// the context still current and the exclusion held; then the frame is left
// (place.Frame.Leave says in which order).
func (c *tenantCore) unwind(op string, fr *place.Frame, run **admission.Run, err *error) {
	if e := (*run).End(); e != nil {
		*err = errors.Join(*err, c.doFail(op, fmt.Errorf("metering: %w", e)))
	}
	// Past the guard (raw): putting the thread's context back is no device
	// work, and a lost pool must not leave its green context current.
	if e := fr.Leave(c.pool.raw); e != nil {
		*err = errors.Join(*err, c.doFail(op, fmt.Errorf("restoring the thread's context: %w", e)))
	}
}

// doFail is fail for doOnThread's own errors: bare where op is "".
func (c *tenantCore) doFail(op string, err error) error {
	if op == "" {
		return err
	}
	return c.fail(op, err)
}

// checkNotInsideDo is called by what would wait for the tenant's Dos to
// end (Close, Shutdown, Reshape; the pool's Close and Shutdown) before it
// begins: from inside one it would wait for itself. Its error is bare: the
// caller names the call.
func (c *tenantCore) checkNotInsideDo() error {
	// Pinned for the look (inside.Threads.Pinned says why).
	if c.dos.Pinned() {
		return errInsideOwnDo
	}
	return nil
}

// errInsideOwnDo is checkNotInsideDo's error.
var errInsideOwnDo = fmt.Errorf("%w (the tenant's own); call it after Do returns", errs.ErrInsideDo)
