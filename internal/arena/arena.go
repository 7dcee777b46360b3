// Package arena keeps what a request-sized scope (Tenant.Scope) has
// allocated and not yet freed, for the scope's end to free, so that a
// handler that dies half-way leaks nothing.
package arena

import (
	"errors"
	"fmt"
	"sync"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Set is the allocations of one scope. Allocations race with its end: one
// that completes after End is not the set's (Add says so) and is the
// allocator's to free. The zero Set is open and empty.
type Set[P comparable] struct {
	mu    sync.Mutex
	live  map[P]struct{}
	ended bool
}

// Ended reports whether End has begun.
func (s *Set[P]) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// Add records p as the set's; false, recording nothing, once End has
// begun.
func (s *Set[P]) Add(p P) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	if s.live == nil {
		s.live = map[P]struct{}{}
	}
	s.live[p] = struct{}{}
	return true
}

// Alloc records what alloc allocates as the set's, or is ErrEnded where
// the set has ended: before alloc runs, or while it ran, when what it
// allocated is not the set's to keep and is given to free (its error
// joined).
func (s *Set[P]) Alloc(alloc func() (P, error), free func(P) error) (P, error) {
	var none P
	if s.Ended() {
		return none, ErrEnded
	}
	p, err := alloc()
	if err != nil {
		return none, err
	}
	if !s.Add(p) { // the set ended while alloc ran: not its to keep
		return none, errors.Join(ErrEnded, free(p))
	}
	return p, nil
}

// ErrEnded answers a scope's call after its function returned.
var ErrEnded = fmt.Errorf("%w: the scope has ended (its function returned)", errs.ErrClosed)

// Remove forgets p, freed before the scope's end; false if p is not the
// set's (never added, removed already, or the set has ended).
func (s *Set[P]) Remove(p P) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.live[p]
	delete(s.live, p)
	return ok
}

// End ends the set and frees what it still holds with free, returning
// free's errors joined, but errs.ErrClosed's: the owner closed, and its
// close freed what it held (a tenant's Close frees what is left of its
// memory). Later calls free nothing.
func (s *Set[P]) End(free func(P) error) error {
	s.mu.Lock()
	live := s.live
	s.live, s.ended = nil, true
	s.mu.Unlock()
	var failed []error
	for p := range live {
		if err := free(p); err != nil && !errors.Is(err, errs.ErrClosed) {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}
