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

// scope is Tenant.Scope; h is the handle it was called on. Its own errors
// are TenantErrors, f's are as f returned them.
func (c *tenantCore) scope(h *Tenant, ctx context.Context, f func(s *Scope) error) (err error) {
	if f == nil {
		return c.fail("Scope", errNilFunc)
	}
	if err := ctxErr(ctx); err != nil {
		return c.fail("Scope", err)
	}
	if c.closed.Load() {
		return c.fail("Scope", ErrClosed)
	}
	s := &Scope{h: h, t: c, ctx: ctx}
	defer func() {
		// What f left is freed; memory the tenant's Close freed already is
		// not an error (arena.Set.End).
		if e := s.live.End(c.Free); e != nil {
			err = errors.Join(err, c.fail("Scope", fmt.Errorf("freeing what f left allocated: %w", e)))
		}
	}()
	return f(s)
}

// Alloc allocates n bytes that belong to the scope, under the context
// given to Tenant.Scope (as an http.Request carries its own).
func (s *Scope) Alloc(n uint64) (DevicePtr, error) {
	p, err := s.live.Alloc(func() (DevicePtr, error) { return s.t.Alloc(s.ctx, n) }, s.t.Free)
	if err != nil {
		return 0, s.t.fail("Scope.Alloc", err)
	}
	return p, nil
}

// Free frees memory of the scope before it ends.
func (s *Scope) Free(p DevicePtr) error {
	if !s.live.Remove(p) {
		return s.t.fail("Scope.Free", fmt.Errorf("%w: %#x was not allocated by this scope", ErrUnknownPointer, uint64(p)))
	}
	return s.t.fail("Scope.Free", s.t.Free(p))
}

// Context is the context the scope was made with.
func (s *Scope) Context() context.Context { return s.ctx }

// Tenant is the scope's tenant.
func (s *Scope) Tenant() *Tenant { return s.h }
