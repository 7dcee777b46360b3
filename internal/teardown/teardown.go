// Package teardown runs what a tenant's owner registered to run when the
// tenant closes (fcsp's Tenant.OnClose): each function once, in the order
// registered, a panic turned into an error, since the close must go on and
// give everything back. fcsp chooses the thread and context they run on.
package teardown

import (
	"errors"
	"fmt"
)

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
