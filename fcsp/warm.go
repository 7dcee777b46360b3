package fcsp

import (
	"context"
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/dorun"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// warmupOf is WithWarmup's function, made to say ErrWarmupFailed and to
// turn a panic into an error (dorun.Warmup); nil without one. The
// tenant keeps it nowhere but in its placement where it needs it later
// (place.Warming): a field more would cost every tenant made 32 bytes.
func warmupOf(cfg *tenantConfig) func(Current) error {
	f, ok := cfg.Warm.(func(Current) error)
	if !ok || f == nil {
		return nil
	}
	return dorun.Warmup(f, ErrWarmupFailed)
}

// plainFor is an unpartitioned tenant's placement: the pool's, or, for a
// tenant with a warm-up on the commons, the commons warming each context
// before it serves the tenant (place.NewWarming). Chosen once, here.
func (p *Pool) plainFor(c *tenantCore, cfg *tenantConfig) placement {
	f := warmupOf(cfg)
	if f == nil {
		return p.plain
	}
	return placement{place.NewWarming(p.plain.Placement, dorun.RunIn(context.Background(), (*host)(c), f))}
}

// warmUp runs a new tenant's warm-up (cfg's) in every context it may serve
// from (dorun.WarmEvery), once NewTenant has made it (err nil) and before
// it is handed out. A failure closes the tenant: nothing it took stays
// taken. Its errors are bare: NewTenant names the tenant.
func (p *Pool) warmUp(t *Tenant, err error, cfg *tenantConfig) (*Tenant, error) {
	if err != nil || cfg.Warm == nil {
		return t, err
	}
	c := t.c
	if err := dorun.WarmEvery((*host)(c), warmupOf(cfg)); errors.Is(err, ErrClosed) && c.closed.Load() {
		return t, nil // closed as it was made (WithContext's ctx was done), as without a warm-up
	} else if err != nil {
		c.cleanup.Stop()
		return nil, errors.Join(err, c.close("NewTenant: its warm-up failed"))
	}
	return t, nil
}
