package fcsp

import (
	"context"
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/arena"
)

// Scope is a request-sized arena on a tenant: what is allocated through it
// and not freed is freed when the function given to Tenant.Scope returns,
// fails or panics, so a handler that dies half-way leaks nothing.
type Scope struct {
	h    *Tenant // the handle Scope was called on: keeps the tenant alive
	t    *tenantCore
	ctx  context.Context
	live arena.Set[DevicePtr] // allocated and not freed (internal/arena)
}

// scope is Tenant.Scope; h is the handle it was called on.
func (c *tenantCore) scope(h *Tenant, ctx context.Context, f func(s *Scope) error) (err error) {
	if f == nil || ctx == nil {
		return fmt.Errorf("%w: Scope with a nil function or context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.closed.Load() {
		return ErrClosed
	}
	s := &Scope{h: h, t: c, ctx: ctx}
	defer func() {
		if e := s.release(); e != nil {
			err = errors.Join(err, fmt.Errorf("scope cleanup: %w", e))
		}
	}()
	return f(s)
}

// Alloc allocates n bytes that belong to the scope, under the context
// given to Tenant.Scope (as an http.Request carries its own).
func (s *Scope) Alloc(n uint64) (DevicePtr, error) {
	if s.live.Ended() {
		return 0, fmt.Errorf("tenant %q: Alloc in a scope that has ended: %w", s.t.name, ErrClosed)
	}
	p, err := s.t.Alloc(s.ctx, n)
	if err != nil {
		return 0, err
	}
	if !s.live.Add(p) { // the scope ended while we allocated: not ours to keep
		return 0, errors.Join(fmt.Errorf("tenant %q: Alloc in a scope that has ended: %w", s.t.name, ErrClosed), s.t.Free(p))
	}
	return p, nil
}

// Free frees memory of the scope before it ends.
func (s *Scope) Free(p DevicePtr) error {
	if !s.live.Remove(p) {
		return fmt.Errorf("tenant %q: Free(%#x) in a scope that did not allocate it: %w", s.t.name, uint64(p), ErrUnknownPointer)
	}
	return s.t.Free(p)
}

// Context is the context the scope was made with.
func (s *Scope) Context() context.Context { return s.ctx }

// Tenant is the scope's tenant.
func (s *Scope) Tenant() *Tenant { return s.h }

// release frees what the scope still holds; memory the tenant's Close
// freed already is not an error.
func (s *Scope) release() error {
	return s.live.End(func(p DevicePtr) error {
		if err := s.t.Free(p); !errors.Is(err, ErrClosed) {
			return err
		}
		return nil
	})
}
