package teardown

import (
	"errors"
	"fmt"
	"log/slog"
)

// PoolClosed is the why of a tenant the pool's Close closed.
const PoolClosed = "pool closed"

// Closed is the why of a tenant its own Close closed: said only where it
// left allocations, which Close freed.
const Closed = "Tenant.Close"

// Reclaimed logs a close that was not the owner's own (why: the
// garbage collector's, a context's end, the pool's Close) or that found
// allocations leaked: a warning, but for the pool's Close of a tenant
// that leaked nothing, which closes open tenants as documented and is
// not a reclaim. An owner's clean Close logs nothing.
func Reclaimed(log *slog.Logger, tenant, why string, leaks int) {
	if (why == "" || why == Closed) && leaks == 0 {
		return
	}
	if why == Closed { // the owner's own Close: nothing was reclaimed from it
		log.Warn("tenant closed with live allocations, which Close freed", "tenant", tenant, "why", why, "leaked_allocations", leaks)
		return
	}
	logf := log.Warn
	if why == PoolClosed && leaks == 0 {
		logf = log.Info
	}
	logf("tenant reclaimed", "tenant", tenant, "why", why, "leaked_allocations", leaks)
}

// Run calls each of hooks with cur, in order, and joins their errors; a
// hook that panics is an error saying so, and the others still run.
func Run[C any](hooks []func(C) error, cur C) error {
	var errs []error
	for _, f := range hooks {
		errs = append(errs, run(f, cur))
	}
	return errors.Join(errs...)
}

func run[C any](f func(C) error, cur C) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("OnClose function panicked: %v", r)
		}
	}()
	return f(cur)
}
