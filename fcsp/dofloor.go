package fcsp

import (
	"context"

	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// Bandwidth floors (priority.go) for Do and graph launches: while a
// LatencyCritical tenant has work in flight, a floored tenant's Do and
// graphs are charged predicted/floor in all, as its kernel launches are;
// the surcharge over the share's charge is not corrected.

// floorExtra is what work costing base tokens at the tenant's share (0 at
// share 1) costs beyond that while a latency tenant is busy: the work is
// then charged its predicted GPU time / floor in all. predicted is asked only
// then (the floored path alone pays for the estimate). 0 for a tenant
// without a floor or while no latency tenant is busy.
func (c *tenantCore) floorExtra(base float64, predicted func() float64) float64 {
	if c.prio.floor == 0 {
		return 0
	}
	pp := &c.pool.prio
	if pp.busy.Load() == 0 {
		return 0
	}
	pp.refresh(c.pool)
	if pp.busy.Load() == 0 {
		return 0
	}
	full := base
	if full == 0 { // share 1 is admitted free: price it as a share below 1 is
		full = predicted()
	}
	return full/c.prio.floor - base
}

// waitFloored is b.WaitCost for a tenant that may have a floor, as
// admitLaunchFloored is for a launch: cost sets *extra (its surcharge) on
// each evaluation, and a wait at the floor ends when the latency tenants
// go idle, the work then admitted at the full share. It returns the total
// charged.
func (c *tenantCore) waitFloored(ctx context.Context, b *tokenbucket.Stream, cost func() float64, extra *float64) (float64, error) {
	if c.prio.floor == 0 {
		return b.WaitCost(ctx, cost)
	}
	idle := c.pool.prio.idleChan() // before cost looks at busy: a fall to 0 after this closes it
	if total := cost(); *extra == 0 {
		return b.WaitCost(ctx, cost)
	} else if b.TryAcquire(total) {
		return total, nil
	}
	var total float64
	woken, err := untilIdle(ctx, idle, func(wctx context.Context) (err error) {
		total, err = b.WaitCost(wctx, cost)
		return err
	})
	if woken {
		return b.WaitCost(ctx, cost) // the latency tenants went idle: evaluated again
	}
	return total, err
}
