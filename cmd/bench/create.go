package main

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// tenantSMs is the partition size of the creation and launch rows.
const tenantSMs = 16

// creation times tenant creation plus Close three ways, against the raw
// driver making a green context (what a partition is) and an ordinary
// context (what a process or a context-per-tenant design pays).
//
// Loops are short on purpose: cuCtxCreate costs ~150-200 ms on the H200, and
// thousands of green-context create/destroy cycles made cuGreenCtxCreate
// fail with out-of-memory there.
func (b *bench) creation() error {
	nGreen, nCtx := b.n(100, 10), b.n(5, 2)

	pool, err := b.open()
	if err != nil {
		return err
	}
	defer pool.Close()
	tenant := func(p *fcsp.Pool, opts ...fcsp.TenantOption) func(int) error {
		return func(int) error {
			t, err := p.NewTenant("bench", opts...)
			if err != nil {
				return err
			}
			return t.Close()
		}
	}
	cold := tenant(pool, fcsp.WithSMs(tenantSMs))
	if err := cold(0); err != nil { // warm-up
		return err
	}
	b.logf("create: %d tenants with %d SMs, cold", nGreen, tenantSMs)
	coldT, err := timeEach(nGreen, cold)
	if err != nil {
		return fmt.Errorf("cold tenant: %w", err)
	}
	b.logf("create: %d unpartitioned tenants", nGreen)
	sharedT, err := timeEach(nGreen, tenant(pool))
	if err != nil {
		return fmt.Errorf("unpartitioned tenant: %w", err)
	}

	// Prewarmed: the pool provisions one partition at Open; a closed tenant's
	// partition of a prewarmed size goes back to the spares, so the loop
	// keeps taking the prewarmed path (where fcsp recycles spares).
	warm, err := b.open(fcsp.WithPrewarm(tenantSMs))
	if err != nil {
		return err
	}
	defer warm.Close()
	recycled, err := recycles(warm)
	if err != nil {
		return err
	}
	b.logf("create: %d tenants with %d SMs, prewarmed pool (spare recycled on Close: %v)", nGreen, tenantSMs, recycled)
	var warmT summary
	if recycled {
		warmT, err = timeEach(nGreen, tenant(warm, fcsp.WithSMs(tenantSMs)))
	} else {
		warmT, err = b.prewarmedByReopening(nGreen)
	}
	if err != nil {
		return fmt.Errorf("prewarmed tenant: %w", err)
	}

	raw, err := b.openRaw()
	if err != nil {
		return err
	}
	defer raw.close()
	green := func(int) error { return raw.greenCycle(tenantSMs) }
	if err := green(0); err != nil {
		return err
	}
	b.logf("create: %d raw green contexts (split, descriptor, cuGreenCtxCreate, stream, destroy)", nGreen)
	greenT, err := timeEach(nGreen, green)
	if err != nil {
		return fmt.Errorf("raw green context: %w", err)
	}
	ctxCycle := func(int) error {
		c, err := raw.drv.CtxCreate(raw.dev)
		if err != nil {
			return err
		}
		return raw.drv.CtxDestroy(c)
	}
	b.logf("create: %d raw cuCtxCreate+cuCtxDestroy", nCtx)
	ctxT, err := timeEach(nCtx, ctxCycle)
	if err != nil {
		return fmt.Errorf("cuCtxCreate: %w", err)
	}

	const rawGreen = "raw split+desc+cuGreenCtxCreate+stream, destroyed"
	const rawCtx = "raw cuCtxCreate+cuCtxDestroy"
	const oh004 = "HAMi-core OH-004: context creation 84 ms under HAMi vs 82 ms native"
	n := func(k int) string { return fmt.Sprintf("mean of %d", k) }
	b.addTime(Row{Section: "create", Metric: fmt.Sprintf("tenant %d SMs cold: NewTenant+Close", tenantSMs),
		Against: rawGreen, Note: n(nGreen), DriverBound: true}, coldT.mean(), greenT.mean())
	warmNote := n(nGreen) + "; spare recycled on Close"
	if !recycled {
		warmNote = n(nGreen) + "; this fcsp does not recycle spares: a prewarmed pool reopened (untimed) for each"
	}
	b.addTime(Row{Section: "create", Metric: fmt.Sprintf("tenant %d SMs prewarmed: NewTenant+Close", tenantSMs),
		Against: rawGreen, Note: warmNote, DriverBound: true}, warmT.mean(), greenT.mean())
	b.addTime(Row{Section: "create", Metric: fmt.Sprintf("tenant %d SMs cold vs a context per tenant", tenantSMs),
		Against: rawCtx, Note: fmt.Sprintf("means of %d and %d", nGreen, nCtx), DriverBound: true, Published: oh004},
		coldT.mean(), ctxT.mean())
	b.addTime(Row{Section: "create", Metric: "tenant unpartitioned: NewTenant+Close",
		Against: rawCtx, Note: fmt.Sprintf("means of %d and %d", nGreen, nCtx), DriverBound: true, Published: oh004},
		sharedT.mean(), ctxT.mean())
	return nil
}

// prewarmedByReopening times NewTenant+Close on a freshly opened prewarmed
// pool each time (Open untimed), for an fcsp whose Close does not give the
// partition back to the spares.
func (b *bench) prewarmedByReopening(n int) (summary, error) {
	ns := make([]float64, 0, n)
	for range n {
		p, err := b.open(fcsp.WithPrewarm(tenantSMs))
		if err != nil {
			return nil, err
		}
		s, err := timeEach(1, func(int) error {
			t, err := p.NewTenant("bench", fcsp.WithSMs(tenantSMs))
			if err != nil {
				return err
			}
			return t.Close()
		})
		if err := errors.Join(err, p.Close()); err != nil {
			return nil, err
		}
		ns = append(ns, s[0])
	}
	return summarize(ns), nil
}

// recycles reports whether a prewarmed pool hands the same partition to the
// next tenant after Close (the same green context twice in a row). On a
// real driver a new context could land at a freed one's address, so the
// check also asks that taking it again was much cheaper than building one.
func recycles(p *fcsp.Pool) (bool, error) {
	var ctxs [2]uintptr
	var cost [2]float64
	for i := range ctxs {
		s, err := timeEach(1, func(int) error {
			t, err := p.NewTenant("probe", fcsp.WithSMs(tenantSMs))
			if err != nil {
				return err
			}
			ctxs[i] = t.Context()
			return t.Close()
		})
		if err != nil {
			return false, err
		}
		cost[i] = s[0]
	}
	if ctxs[0] != ctxs[1] {
		return false, nil
	}
	return p.Device().Simulated || cost[1] < cost[0]/2 || cost[1] < 200e3, nil
}

// greenCycle is what a partition costs the driver, without the SDK: split
// the device's SMs, describe one group, build a green context with a stream,
// and destroy both.
func (r *rawDriver) greenCycle(sms int) error {
	res, err := r.drv.DeviceGetDevResource(r.dev, cuda.ResourceSM)
	if err != nil {
		return err
	}
	groups, _, _, err := r.drv.DevSmResourceSplitByCount(res, 0, uint32(sms), 1)
	if err != nil {
		return err
	}
	if len(groups) == 0 {
		return errors.New("the driver made no group")
	}
	desc, err := r.drv.DevResourceGenerateDesc(groups[:1])
	if err != nil {
		return err
	}
	g, err := r.drv.GreenCtxCreate(desc, r.dev, cuda.GreenCtxDefaultStream)
	if err != nil {
		return err
	}
	s, err := r.drv.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0)
	if err != nil {
		return errors.Join(err, r.drv.GreenCtxDestroy(g))
	}
	ctx, err := r.drv.CtxFromGreenCtx(g)
	if err != nil {
		return errors.Join(err, r.drv.GreenCtxDestroy(g))
	}
	return errors.Join(r.drv.StreamDestroy(ctx, s), r.drv.GreenCtxDestroy(g))
}
