package fcsp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
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
	n := c.place.dos()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		held sync.WaitGroup // every run holds its context
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	all := make(chan struct{})
	held.Add(n)
	go func() { held.Wait(); close(all) }()
	for range n {
		wg.Go(func() {
			entered := false
			err := c.Do(ctx, func(cur Current) error {
				entered = true
				err := f(cur)
				held.Done()
				select {
				case <-all:
				case <-ctx.Done():
				}
				return err
			})
			if !entered {
				held.Done()
				cancel() // one run cannot start: the others need not wait for it
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	runtime.KeepAlive(c)
	return errors.Join(errs...)
}
