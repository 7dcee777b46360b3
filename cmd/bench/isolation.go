package main

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// isolation is the day-94 lesson's headline (examples/day94): a stream of
// short jobs launched while one long batch job runs, both as tenants, timed
// on the GPU clock. Ours: two tenants with half the SMs each (green
// contexts); baseline: two unpartitioned tenants sharing every SM on two
// streams. It needs a GPU.
func (b *bench) isolation() error {
	const shortRow, allRow = "day-94 short jobs done (isolation)", "day-94 everything done (cost of the split)"
	if b.sim {
		for _, m := range []string{shortRow, allRow} {
			b.add(Row{Section: "isolation", Metric: m, Against: "two unpartitioned tenants, two streams",
				Skipped: "needs a GPU", Note: "needs a GPU"})
		}
		return nil
	}
	c := b.cfg
	gran := b.info.Granularity
	half := b.info.SMs / 2 / gran * gran

	b.logf("isolation: shared, batch %dx%d, short %dx%d x%d launches, %d reps", c.batchN, c.batchSteps, c.shortN, c.shortSteps, c.shortLaunches, c.reps)
	sharedShort, sharedAll, err := b.layout(nil)
	if err != nil {
		return fmt.Errorf("shared: %w", err)
	}
	b.logf("isolation: partitioned, %d + %d SMs", half, half)
	partShort, partAll, err := b.layout([]fcsp.Option{fcsp.WithPartitionUnit(half)}, fcsp.WithSMs(half))
	if err != nil {
		return fmt.Errorf("partitioned: %w", err)
	}
	sizes := fmt.Sprintf("median of %d; batch %dx%d steps, short %dx%d steps x%d", c.reps, c.batchN, c.batchSteps, c.shortN, c.shortSteps, c.shortLaunches)
	against := "two unpartitioned tenants, two streams"
	b.add(Row{Section: "isolation", Metric: fmt.Sprintf("%s, %d+%d SMs", shortRow, half, half), Ours: partShort, Baseline: sharedShort,
		Unit: "ms", Against: against, Note: "GPU clock; " + sizes, DriverBound: true})
	b.add(Row{Section: "isolation", Metric: fmt.Sprintf("%s, %d+%d SMs", allRow, half, half), Ours: partAll, Baseline: sharedAll,
		Unit: "ms", Against: against, Note: "GPU clock; " + sizes, DriverBound: true})
	return nil
}

// layout opens a pool with popts, makes a batch and a short tenant with
// topts, runs the schedule c.reps times and returns the median times (ms)
// until the short jobs and until everything is done.
func (b *bench) layout(popts []fcsp.Option, topts ...fcsp.TenantOption) (shortMs, allMs float64, err error) {
	c := b.cfg
	pool, err := b.open(popts...)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, pool.Close()) }()
	bt, err := pool.NewTenant("batch", topts...)
	if err != nil {
		return 0, 0, err
	}
	st, err := pool.NewTenant("short", topts...)
	if err != nil {
		return 0, 0, err
	}
	batch, err := workload.NewJob(b.ctx, bt, bt.Stream(), c.batchN, c.batchSteps, 1)
	if err != nil {
		return 0, 0, err
	}
	short, err := workload.NewJob(b.ctx, st, st.Stream(), c.shortN, c.shortSteps, c.shortLaunches)
	if err != nil {
		return 0, 0, err
	}
	tm, err := workload.NewTimer(pool)
	if err != nil {
		return 0, 0, err
	}
	defer tm.Close()
	shortMs, allMs, err = tm.Measure(b.ctx, c.reps, batch, short, batch.S, short.S)
	if err != nil {
		return 0, 0, err
	}
	if _, err := short.Result(); err != nil {
		return 0, 0, err
	}
	return shortMs, allMs, nil
}
