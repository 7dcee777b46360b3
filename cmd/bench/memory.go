package main

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/hamibase"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// cycleBytes is the size of one accounting cycle's allocation.
const cycleBytes = 4096

// memory times a tracked 1 MiB allocation against the raw driver call, and
// the quota check alone against the HAMi-style baseline.
func (b *bench) memory() error {
	const size = 1 << 20
	n := b.n(2000, 100)
	pool, err := b.open()
	if err != nil {
		return err
	}
	defer pool.Close()
	// Unpartitioned, so that both sides allocate in the primary context.
	t, err := pool.NewTenant("bench")
	if err != nil {
		return err
	}
	defer t.Close()
	raw, err := b.openRaw()
	if err != nil {
		return err
	}
	defer raw.close()
	ours := func(int) error {
		p, err := t.Alloc(b.ctx, size)
		if err != nil {
			return err
		}
		return t.Free(p)
	}
	base := func(int) error {
		p, err := raw.drv.MemAlloc(raw.primary, size)
		if err != nil {
			return err
		}
		return raw.drv.MemFree(raw.primary, p)
	}
	b.logf("memory: %d x 1 MiB alloc+free through a tenant and raw", n)
	oursT, baseT, err := timePair(n, ours, base, "tenant alloc", "raw alloc")
	if err != nil {
		return err
	}
	const rawMem = "raw cuMemAlloc+cuMemFree, primary context"
	b.addTime(Row{Section: "memory", Metric: "alloc+free 1 MiB, mean", Against: rawMem,
		Note: fmt.Sprintf("%d each; quota check + record + driver", n), DriverBound: true}, oursT.mean(), baseT.mean())
	b.addTime(Row{Section: "memory", Metric: "alloc+free 1 MiB, P99", Against: rawMem,
		Note: fmt.Sprintf("%d each", n), DriverBound: true}, oursT.p(99), baseT.p(99))

	if err := b.pooledAlloc(pool, raw, n); err != nil {
		return err
	}

	ops := b.n(500_000, 5_000)
	for _, tenants := range []int{1, 64, 1024} {
		q, err := newQuotas(tenants)
		if err != nil {
			return err
		}
		for i := range 1000 { // warm-up
			if err := errors.Join(q.ours(i%tenants, uint64(i)<<12), q.hami(i%tenants, uint64(i)<<12)); err != nil {
				return err
			}
		}
		b.logf("memory: quota check, %d tenants, %d ops each", tenants, ops)
		oursNs, err := timePer(ops, func(i int) error { return q.ours(i%tenants, uint64(i)<<12) })
		if err != nil {
			return err
		}
		hamiNs, err := timePer(ops, func(i int) error { return q.hami(i%tenants, uint64(i)<<12) })
		if err != nil {
			return err
		}
		b.addTime(Row{Section: "memory", Metric: fmt.Sprintf("quota check, %d %s", tenants, plural(tenants, "tenant")),
			Against: "HAMi-style: one lock, O(N) slot scan",
			Note:    fmt.Sprintf("Reserve+Record+Release, mean of %d", ops)}, oursNs, hamiNs)
	}
	return nil
}

// pooledAlloc times 1 MiB alloc+free through a tenant with a
// stream-ordered memory pool (WithMemoryPool) against the raw driver doing
// the same from a pool of its own on a stream of the primary context.
func (b *bench) pooledAlloc(pool *fcsp.Pool, raw *rawDriver, n int) (err error) {
	const size = 1 << 20
	t, err := pool.NewTenant("bench-pooled", fcsp.WithMemoryPool(0))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, t.Close()) }()
	d, c := raw.drv, raw.primary
	mp, err := d.MemPoolCreate(c, raw.dev, 0)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.MemPoolDestroy(c, mp)) }()
	s, err := d.StreamCreate(c, cuda.StreamNonBlocking)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.StreamSynchronize(c, s), d.StreamDestroy(c, s)) }()
	ours := func(int) error {
		p, err := t.Alloc(b.ctx, size)
		if err != nil {
			return err
		}
		return t.Free(p)
	}
	base := func(int) error {
		p, err := d.MemAllocFromPoolAsync(c, size, mp, s)
		if err != nil {
			return err
		}
		return d.MemFreeAsync(c, p, s)
	}
	b.logf("memory: %d x 1 MiB alloc+free from a memory pool, tenant and raw", n)
	oursT, baseT, err := timePair(n, ours, base, "tenant pooled alloc", "raw pooled alloc")
	if err != nil {
		return err
	}
	b.addTime(Row{Section: "memory", Metric: "alloc+free 1 MiB, WithMemoryPool, mean",
		Against: "raw cuMemAllocFromPoolAsync+cuMemFreeAsync, own pool and stream",
		Note:    fmt.Sprintf("%d each, stream-ordered, no sync", n), DriverBound: true}, oursT.mean(), baseT.mean())

	// Sixteen goroutines at once, the case serving code is in: the tenant's
	// pool against raw cuMemAlloc/cuMemFree (the driver's allocator without
	// a pool), each side alone.
	const g = 16
	per := b.n(2000, 50)
	rawPair := func(int, uint64) error {
		p, err := d.MemAlloc(c, size)
		if err != nil {
			return err
		}
		return d.MemFree(c, p)
	}
	b.logf("memory: %d goroutines x %d x 1 MiB alloc+free, tenant pool and raw cuMemAlloc", g, per)
	if oursT, err = concurrently(g, per, 1, 1, func(int, uint64) error { return ours(0) }); err != nil {
		return err
	}
	if baseT, err = concurrently(g, per, 1, 1, rawPair); err != nil {
		return err
	}
	const rawConc = "raw cuMemAlloc+cuMemFree, 16 goroutines"
	note := fmt.Sprintf("%d goroutines x %d, Alloc/Free on the tenant's first stream", g, per)
	b.addTime(Row{Section: "memory", Metric: "alloc+free 1 MiB, WithMemoryPool, 16 goroutines, mean",
		Against: rawConc, Note: note, DriverBound: true}, oursT.mean(), baseT.mean())
	b.addTime(Row{Section: "memory", Metric: "alloc+free 1 MiB, WithMemoryPool, 16 goroutines, P99",
		Against: rawConc, Note: note, DriverBound: true}, oursT.p(99), baseT.p(99))
	return nil
}

// quotas is the same set of tenants accounted by memtrack and by the
// HAMi-style baseline.
type quotas struct {
	accts []*memtrack.Account
	h     *hamibase.Tracker
}

func newQuotas(tenants int) (*quotas, error) {
	tr, err := memtrack.New(1 << 40)
	if err != nil {
		return nil, err
	}
	q := &quotas{h: hamibase.New(1<<40, tenants)}
	for i := range tenants {
		a, err := tr.NewAccount(fmt.Sprintf("t%d", i), 1<<36)
		if err != nil {
			return nil, err
		}
		q.accts = append(q.accts, a)
	}
	return q, nil
}

// ours is one allocation's accounting through memtrack: admit, record, free.
func (q *quotas) ours(i int, ptr uint64) error {
	a := q.accts[i]
	r, err := a.Reserve(cycleBytes)
	if err != nil {
		return err
	}
	if err := r.Commit(ptr); err != nil {
		return err
	}
	_, err = a.Release(ptr)
	return err
}

// hami is the same through the baseline.
func (q *quotas) hami(i int, ptr uint64) error {
	if !q.h.Cycle(i, ptr, cycleBytes) {
		return fmt.Errorf("baseline refused tenant %d", i)
	}
	return nil
}

// contention times the quota check from many goroutines at once and reports
// the P50 and P99 of single checks (every 8th is timed).
func (b *bench) contention() error {
	const tenants, sampleEvery = 64, 8
	const oh006 = "HAMi-core OH-006: P99 94.1 ms vs mean 1.9 ms under contention"
	for _, g := range []int{4, 64} {
		per := b.n(400_000, 4_000) / g
		q, err := newQuotas(tenants)
		if err != nil {
			return err
		}
		b.logf("contention: %d goroutines x %d quota checks, %d tenants", g, per, tenants)
		oursS, err := concurrently(g, per, tenants, sampleEvery, q.ours)
		if err != nil {
			return err
		}
		hamiS, err := concurrently(g, per, tenants, sampleEvery, q.hami)
		if err != nil {
			return err
		}
		note := fmt.Sprintf("%d tenants, %d samples", tenants, len(oursS))
		const against = "HAMi-style: one lock, O(N) slot scan"
		b.addTime(Row{Section: "contention", Metric: fmt.Sprintf("quota check P50, %d goroutines", g),
			Against: against, Note: note}, oursS.p(50), hamiS.p(50))
		b.addTime(Row{Section: "contention", Metric: fmt.Sprintf("quota check P99, %d goroutines", g),
			Against: against, Note: note, Published: oh006}, oursS.p(99), hamiS.p(99))
	}
	return nil
}

// concurrently runs per calls of f on each of g goroutines, started
// together, each on its own pointers and spread over the tenants, and
// returns the durations of every sampleEvery-th call.
func concurrently(g, per, tenants, sampleEvery int, f func(tenant int, ptr uint64) error) (summary, error) {
	samples := make([][]float64, g)
	errs := make([]error, g)
	var wg, start sync.WaitGroup
	start.Add(1)
	for w := range g {
		wg.Go(func() {
			s := make([]float64, 0, per/sampleEvery+1)
			base := uint64(w+1) << 40
			start.Wait()
			for i := range per {
				tenant, ptr := (w+i*g)%tenants, base+uint64(i)<<12
				if i%sampleEvery != 0 {
					if err := f(tenant, ptr); err != nil {
						errs[w] = err
						return
					}
					continue
				}
				t0 := time.Now()
				err := f(tenant, ptr)
				s = append(s, float64(time.Since(t0)))
				if err != nil {
					errs[w] = err
					return
				}
			}
			samples[w] = s
		})
	}
	start.Done()
	wg.Wait()
	var all []float64
	for w := range g {
		if errs[w] != nil {
			return nil, errs[w]
		}
		all = append(all, samples[w]...)
	}
	return summarize(all), nil
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// timePair warms both paths (the driver's allocator caches), then times n
// calls of each, ours first.
func timePair(n int, ours, base func(int) error, oursName, baseName string) (oursT, baseT summary, err error) {
	for range 10 {
		if err := errors.Join(ours(0), base(0)); err != nil {
			return oursT, baseT, err
		}
	}
	if oursT, err = timeEach(n, ours); err != nil {
		return oursT, baseT, fmt.Errorf("%s: %w", oursName, err)
	}
	if baseT, err = timeEach(n, base); err != nil {
		return oursT, baseT, fmt.Errorf("%s: %w", baseName, err)
	}
	return oursT, baseT, nil
}
