package inside

import (
	"context"
	"errors"
	"sync"
)

// Each runs n calls of do at once, each running f, and returns when all
// have returned, their errors joined: Tenant.DoEach, where do runs f as a
// Do would (i numbers the call, 0 to n-1) and n is the number of contexts
// a Do may hold. Each call, once f has run, holds its context until all n
// have run theirs, so that every context gets one, or until ctx ends; a
// call whose do returns without running f (it could not start) ends the
// others' wait, which would otherwise be for it.
//
// A panic in a call (in f, or in do) ends the others' wait too and goes on
// in Each's caller, once every call has returned, as a Do's panic goes on
// in its caller: a panic left on a call's goroutine would end the process,
// whatever the caller recovers.
func Each[C any](ctx context.Context, n int, do func(ctx context.Context, i int, f func(C) error) error, f func(C) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		held     sync.WaitGroup // every run holds its context
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		panicked bool
		value    any // the first panic's
	)
	all := make(chan struct{})
	held.Add(n)
	go func() { held.Wait(); close(all) }()
	for i := range n {
		wg.Go(func() {
			counted := false // held.Done was called for this run
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					if !panicked {
						panicked, value = true, r
					}
					mu.Unlock()
				}
				if !counted {
					// This run could not start, or panicked: the others
					// need not wait for it.
					held.Done()
					cancel()
				}
			}()
			err := do(ctx, i, func(cur C) error {
				err := f(cur)
				counted = true
				held.Done()
				select {
				case <-all:
				case <-ctx.Done():
				}
				return err
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if panicked {
		panic(value)
	}
	return errors.Join(errs...)
}

// Turn lets one caller at a time through (DoEach: two at once would each
// hold part of the contexts and wait for the rest), waiting as long as ctx
// lets it. The zero Turn is ready for use.
type Turn struct {
	mu sync.Mutex
	ch chan struct{} // holds a token while the turn is taken; made at the first Take
}

// Take waits for the turn, or returns ctx's error if ctx ends first. The
// caller gives it back with Give.
func (t *Turn) Take(ctx context.Context) error {
	t.mu.Lock()
	if t.ch == nil {
		t.ch = make(chan struct{}, 1)
	}
	ch := t.ch
	t.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Give gives back the turn Take took.
func (t *Turn) Give() {
	t.mu.Lock()
	ch := t.ch
	t.mu.Unlock()
	<-ch
}
