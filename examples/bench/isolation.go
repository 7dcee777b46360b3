package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/internal/kernels"
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
	batch, err := newJob(b.ctx, bt, c.batchN, c.batchSteps, 1)
	if err != nil {
		return 0, 0, err
	}
	short, err := newJob(b.ctx, st, c.shortN, c.shortSteps, c.shortLaunches)
	if err != nil {
		return 0, 0, err
	}
	var ev [3]*fcsp.Event // start, short done, all done
	for i := range ev {
		if ev[i], err = pool.NewEvent(); err != nil {
			return 0, 0, err
		}
		defer ev[i].Close()
	}
	var shorts, alls []float64
	for range c.reps {
		s, a, err := schedule(b.ctx, ev, batch, short)
		if err != nil {
			return 0, 0, err
		}
		shorts, alls = append(shorts, s), append(alls, a)
	}
	if err := short.check(); err != nil {
		return 0, 0, err
	}
	return median(shorts), median(alls), nil
}

// schedule runs the batch job and then the short jobs, each on its tenant's
// stream, recording the events on the primary context's NULL stream (as the
// day-94 C++ reference does), and returns the GPU times in ms.
func schedule(ctx context.Context, ev [3]*fcsp.Event, batch, short *job) (shortMs, allMs float64, err error) {
	if err := ev[0].Record(nil); err != nil {
		return 0, 0, err
	}
	if err := batch.submit(ctx); err != nil {
		return 0, 0, err
	}
	if err := short.submit(ctx); err != nil {
		return 0, 0, err
	}
	if err := short.s.Synchronize(); err != nil {
		return 0, 0, err
	}
	if err := ev[1].Record(nil); err != nil {
		return 0, 0, err
	}
	if err := batch.s.Synchronize(); err != nil {
		return 0, 0, err
	}
	if err := ev[2].Record(nil); err != nil {
		return 0, 0, err
	}
	if err := ev[2].Synchronize(); err != nil {
		return 0, 0, err
	}
	s, err := ev[1].Since(ev[0])
	if err != nil {
		return 0, 0, err
	}
	a, err := ev[2].Since(ev[0])
	return ms(s), ms(a), err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// job is one workload of the chain kernel bound to a tenant's stream.
type job struct {
	t        *fcsp.Tenant
	s        *fcsp.Stream
	fn       *fcsp.Function
	buf      fcsp.DevicePtr
	n, steps int
	launches int
	args     fcsp.Args
}

func newJob(ctx context.Context, t *fcsp.Tenant, n, steps, launches int) (*job, error) {
	mod, err := t.LoadModule(kernels.PTX)
	if err != nil {
		return nil, err
	}
	fn, err := mod.Function("chain")
	if err != nil {
		return nil, err
	}
	buf, err := t.Alloc(ctx, uint64(4*n))
	if err != nil {
		return nil, err
	}
	j := &job{t: t, s: t.Stream(), fn: fn, buf: buf, n: n, steps: steps, launches: launches}
	j.args.Ptr(buf).Int32(int32(n)).Int32(int32(steps))
	return j, nil
}

func (j *job) submit(ctx context.Context) error {
	grid, block := fcsp.Dim3{X: uint32((j.n + 255) / 256), Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}
	for range j.launches {
		if err := j.s.Launch(ctx, j.fn, grid, block, 0, &j.args); err != nil {
			return err
		}
	}
	return nil
}

// check copies the job's output back and checks it against the closed form.
func (j *job) check() error {
	out := make([]byte, 4*j.n)
	if err := j.t.CopyFromDevice(out, j.buf); err != nil {
		return err
	}
	return kernels.CheckChain(out, j.steps)
}
