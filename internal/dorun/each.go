package dorun

import (
	"context"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// Each runs f as Tenant.DoEach does: once in each of the contexts a Do of
// the tenant may hold, concurrently, each run holding its context until
// all have run (inside.Each), then, for a reshapable tenant, in the
// contexts of its other sizes (WarmOthers). Its own errors, and each
// run's, are named as DoEach's; f's are as f returned them. The caller
// has checked its arguments, and that it is not inside one of the
// tenant's Dos (its runs would wait for the context that Do holds).
func Each[C any](ctx context.Context, t Tenant[C], f func(C) error) error {
	const op = "DoEach"
	p := t.Parts()
	// Each run holds its context until all have run (inside.Each), so
	// nothing else may take part of the contexts meanwhile and wait for
	// the rest. Another DoEach would, the other unpartitioned tenants'
	// too where the contexts are the commons': one at a time, a turn per
	// placement (none where nothing excludes).
	if turn := place.Turn(p.Placement); turn != nil {
		if err := turn.Take(ctx); err != nil {
			return t.Fail(op, err)
		}
		defer turn.Give()
	}
	n := place.Dos(p.Placement)
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
	if p.Admission.Metered() {
		key := admission.FuncKey(f)
		for range n {
			r, o, err := p.Admission.BeginDo(ctx, key, false)
			if err != nil {
				abandon()
				return t.Fail(op, err)
			}
			runs, own = append(runs, r), append(own, o)
		}
	}
	// The runs are counted in the life lock once, here, not each as a Do:
	// a Reshape's pause then falls before all of them or after, never
	// between, where the runs that came after it would wait at its gate
	// and the runs holding contexts for them would keep it waiting.
	slot, err := t.Enter()
	if err != nil {
		abandon()
		return t.Fail(op, err)
	}
	defer t.Exit(slot)
	err = inside.Each(ctx, n, func(ctx context.Context, i int, f func(C) error) error {
		if runs == nil {
			return onThread(ctx, t, &p, op, f, nil, false)
		}
		return onThread(ctx, t, &p, op, f, runs[i], own[i])
	}, f)
	if err == nil {
		err = WarmOthers(ctx, t, f) // a reshapable tenant's other sizes
	}
	runtime.KeepAlive(t) // the tenant's core, until every run has returned
	return err
}
