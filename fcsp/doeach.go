package fcsp

import (
	"context"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// DoEach is Tenant.DoEach.
func (c *tenantCore) DoEach(ctx context.Context, f func(Current) error) error {
	if f == nil {
		return c.fail("DoEach", errNilFunc)
	}
	if ctx == nil {
		return c.fail("DoEach", errNilContext)
	}
	if err := ctx.Err(); err != nil {
		return c.fail("DoEach", err)
	}
	if err := c.checkNotInsideDo(); err != nil {
		return c.fail("DoEach", err) // its runs would wait for the context this Do holds
	}
	// Each run holds its context until all have run (inside.Each), so
	// nothing else may take part of the contexts meanwhile and wait for
	// the rest. Another DoEach would, the other unpartitioned tenants'
	// too where the contexts are the commons': one at a time, a turn per
	// placement (none where nothing excludes).
	if turn := place.Turn(c.place.Placement); turn != nil {
		if err := turn.Take(ctx); err != nil {
			return c.fail("DoEach", err)
		}
		defer turn.Give()
	}
	n := c.place.Dos()
	// Metered: every run admitted before anything is held, as a Do is.
	var runs []*admission.Run
	var own []bool
	abandon := func() {
		for i, r := range runs {
			if own[i] {
				r.Abandon()
			}
		}
	}
	if c.adm.Metered() {
		key := admission.FuncKey(f)
		for range n {
			r, o, err := c.adm.BeginDo(ctx, key, false)
			if err != nil {
				abandon()
				return c.fail("DoEach", err)
			}
			runs, own = append(runs, r), append(own, o)
		}
	}
	// The runs are counted in the life lock once, here, not each as a Do:
	// a Reshape's pause then falls before all of them or after, never
	// between, where the runs that came after it would wait at its gate
	// and the runs holding contexts for them would keep it waiting.
	slot, err := c.enter()
	if err != nil {
		abandon()
		return c.fail("DoEach", err)
	}
	defer c.life.Exit(slot)
	// Each run's own errors are named as DoEach's; f's are as f returned
	// them.
	err = inside.Each(ctx, n, func(ctx context.Context, i int, f func(Current) error) error {
		if runs == nil {
			return c.doOnThread(ctx, "DoEach", f, nil, false)
		}
		return c.doOnThread(ctx, "DoEach", f, runs[i], own[i])
	}, f)
	if err == nil {
		err = c.warmOthers(ctx, f) // a reshapable tenant's other sizes
	}
	runtime.KeepAlive(c)
	return err
}
