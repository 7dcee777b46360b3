package inside

import (
	"context"
	"errors"
	"sync"
)

// Each runs n calls of do at once, each running f, and returns when all
// have returned, their errors joined: Tenant.DoEach, where do is Tenant.Do
// and n the number of contexts a Do may hold. Each call, once f has run,
// holds its context until all n have run theirs, so that every context
// gets one, or until ctx ends; a call whose do returns without running f
// (it could not start) ends the others' wait, which would otherwise be
// for it.
func Each[C any](ctx context.Context, n int, do func(context.Context, func(C) error) error, f func(C) error) error {
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
			err := do(ctx, func(cur C) error {
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
	return errors.Join(errs...)
}
