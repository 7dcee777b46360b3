package fcsp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// benchPool opens the GPU if there is one (FCSP_BENCH_DRIVER=fake forces the
// simulator), so the same benchmarks measure the SDK's own overhead on the
// CPU machine and the real costs on the GPU.
func benchPool(b *testing.B, opts ...Option) *Pool {
	b.Helper()
	if os.Getenv("FCSP_BENCH_DRIVER") != "fake" {
		p, err := Open(context.Background(), 0, opts...)
		if err == nil {
			b.Cleanup(func() { p.Close() })
			return p
		}
		if !errors.Is(err, ErrNoDriver) {
			b.Fatal(err)
		}
	}
	p, err := openSimErr(0, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}

func simOpt(p *Pool) []Option {
	if p.info.Simulated {
		return []Option{simulator(fake.H200())}
	}
	return nil
}

// BenchmarkOpen is Pool open and close: driver load (once), primary context
// retain, SM resource, one split.
func BenchmarkOpen(b *testing.B) {
	opts := simOpt(benchPool(b))
	b.ResetTimer()
	for b.Loop() {
		p, err := Open(context.Background(), 0, opts...)
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

// BenchmarkNewTenant: a tenant with its own 16 SMs, made cold (green
// context built on the request path) and from a prewarmed partition, and an
// unpartitioned one; each closed again (the prewarmed case re-provisions
// its spare outside the timer).
func BenchmarkNewTenant(b *testing.B) {
	b.Run("partitioned-cold", func(b *testing.B) {
		p := benchPool(b)
		for b.Loop() {
			t, err := p.NewTenant("t", WithSMs(16))
			if err != nil {
				b.Fatal(err)
			}
			t.Close()
		}
	})
	b.Run("partitioned-prewarmed", func(b *testing.B) {
		// Closing a tenant of a prewarmed size recycles its partition.
		p := benchPool(b, WithPrewarm(16))
		for b.Loop() {
			t, err := p.NewTenant("t", WithSMs(16))
			if err != nil {
				b.Fatal(err)
			}
			t.Close()
		}
	})
	b.Run("partitioned-warmup", func(b *testing.B) {
		// WithWarmup: every one of its 16 contexts made and warmed.
		p := benchPool(b)
		warm := WithWarmup(func(Current) error { return nil })
		for b.Loop() {
			t, err := p.NewTenant("t", WithSMs(16), warm)
			if err != nil {
				b.Fatal(err)
			}
			t.Close()
		}
	})
	b.Run("shared", func(b *testing.B) {
		p := benchPool(b)
		for b.Loop() {
			t, err := p.NewTenant("t")
			if err != nil {
				b.Fatal(err)
			}
			t.Close()
		}
	})
}

// BenchmarkRawGreenCtx is the driver-level baseline for a partition: split,
// descriptor, cuGreenCtxCreate, stream, then destroy; and cuCtxCreate, the
// OH-004 baseline.
func BenchmarkRawGreenCtx(b *testing.B) {
	p := benchPool(b)
	drv, dev := p.drv.(*cuda.Guard).Unwrap(), p.dev.Ordinal()
	res, err := drv.DeviceGetDevResource(dev, cuda.ResourceSM)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cuGreenCtxCreate+stream", func(b *testing.B) {
		for b.Loop() {
			groups, _, _, err := drv.DevSmResourceSplitByCount(res, 0, 16, 1)
			if err != nil {
				b.Fatal(err)
			}
			desc, err := drv.DevResourceGenerateDesc(groups[:1])
			if err != nil {
				b.Fatal(err)
			}
			g, err := drv.GreenCtxCreate(desc, dev, cuda.GreenCtxDefaultStream)
			if err != nil {
				b.Fatal(err)
			}
			s, err := drv.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0)
			if err != nil {
				b.Fatal(err)
			}
			ctx, _ := drv.CtxFromGreenCtx(g)
			drv.StreamDestroy(ctx, s)
			drv.GreenCtxDestroy(g)
		}
	})
	b.Run("cuCtxCreate", func(b *testing.B) {
		base, ok := drv.(cuda.Baseline)
		if !ok {
			b.Skipf("%s makes no ordinary contexts", drv.Name())
		}
		for b.Loop() {
			c, err := base.CtxCreate(dev)
			if err != nil {
				b.Fatal(err)
			}
			if err := base.CtxDestroy(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAlloc: 1 MiB alloc+free through a tenant (quota check, record,
// driver) against the driver call alone, same run.
func BenchmarkAlloc(b *testing.B) {
	p := benchPool(b)
	t, err := p.NewTenant("t", WithSMs(8))
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	ctx := context.Background()
	b.Run("tenant", func(b *testing.B) {
		for b.Loop() {
			ptr, err := t.Alloc(ctx, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			if err := t.Free(ptr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		c := p.dev.Primary()
		for b.Loop() {
			ptr, err := p.drv.MemAlloc(c, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.drv.MemFree(c, ptr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLaunch: launching a one-block kernel through a tenant stream
// (limiter admission, green-context scope, launch) against the binding's
// cuLaunchKernel on a plain stream, same run; synchronised every 1024.
func BenchmarkLaunch(b *testing.B) {
	p := benchPool(b)
	for _, limited := range []bool{false, true} {
		opts := []TenantOption{WithSMs(8)}
		name := "tenant"
		if limited {
			opts = append(opts, WithSMLimit(1))
			name = "tenant-limited"
		}
		t, err := p.NewTenant(name, opts...)
		if err != nil {
			b.Fatal(err)
		}
		fn := spinKernel(b, t)
		var args Args
		args.Uint64(0)
		one := Dim3{X: 1, Y: 1, Z: 1}
		b.Run(name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := t.Stream().Launch(context.Background(), fn, one, one, 0, &args); err != nil {
					b.Fatal(err)
				}
				if i++; i%1024 == 0 {
					t.Stream().Synchronize()
				}
			}
			t.Stream().Synchronize()
		})
		t.Close()
	}
	b.Run("raw", func(b *testing.B) {
		drv, c := p.drv.(*cuda.Guard).Unwrap(), p.dev.Primary()
		mod, err := drv.ModuleLoadData(c, kernels.ChainPTX)
		if err != nil {
			b.Fatal(err)
		}
		defer drv.ModuleUnload(c, mod)
		fn, err := drv.ModuleGetFunction(c, mod, "spin")
		if err != nil {
			b.Fatal(err)
		}
		s, err := drv.StreamCreate(c, cuda.StreamNonBlocking)
		if err != nil {
			b.Fatal(err)
		}
		defer drv.StreamDestroy(c, s)
		var args cuda.Args
		args.Uint64(0)
		one := cuda.Dim3{X: 1, Y: 1, Z: 1}
		i := 0
		for b.Loop() {
			if err := drv.LaunchKernel(c, fn, one, one, 0, s, &args); err != nil {
				b.Fatal(err)
			}
			if i++; i%1024 == 0 {
				drv.StreamSynchronize(c, s)
			}
		}
		drv.StreamSynchronize(c, s)
	})
}

// latencies runs op from g goroutines, b.N times in all, and reports the
// mean and the P99 of single operations (also returned, in ns).
func latencies(b *testing.B, g int, op func() error) (mean, p99 float64) {
	return latenciesEach(b, g, func(int) (func() error, func() error) { return op, nil })
}

// latenciesEach is latencies with state per goroutine: mk(i) makes
// goroutine i's op and what to do after its last one (nil: nothing).
func latenciesEach(b *testing.B, g int, mk func(i int) (op, done func() error)) (mean, p99 float64) {
	per := make([][]int64, g)
	var wg sync.WaitGroup
	n := b.N
	b.ResetTimer()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			op, done := mk(i)
			if done != nil {
				defer func() {
					if err := done(); err != nil {
						b.Error(err)
					}
				}()
			}
			k := n / g
			if i < n%g {
				k++
			}
			lat := make([]int64, 0, k)
			for j := 0; j < k; j++ {
				t0 := time.Now()
				if err := op(); err != nil {
					b.Error(err)
					return
				}
				lat = append(lat, int64(time.Since(t0)))
			}
			per[i] = lat
		}(i)
	}
	wg.Wait()
	b.StopTimer()
	var all []int64
	for _, l := range per {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return 0, 0
	}
	slices.Sort(all)
	var sum int64
	for _, v := range all {
		sum += v
	}
	mean, p99 = float64(sum)/float64(len(all)), float64(all[len(all)*99/100])
	b.ReportMetric(mean/1e3, "mean-us")
	b.ReportMetric(p99/1e3, "p99-us")
	return mean, p99
}

// BenchmarkPoolAlloc: alloc+free through a tenant's pool against raw
// cuMemAlloc/cuMemFree, from 1 and 16 goroutines, in one run, and logs the
// ratios. Cases: 1 MiB on the tenant's first stream (Alloc/Free), 1 MiB
// with a stream per goroutine (AllocAsync/FreeAsync), mixed sizes (4 KiB to
// 4 MiB, up to 8 blocks held per goroutine), and the driver's pool without
// the free lists in front of it, to show what they add.
func BenchmarkPoolAlloc(b *testing.B) {
	p := benchPool(b)
	ctx := context.Background()
	newTenant := func(name string, opts ...TenantOption) *Tenant {
		t, err := p.NewTenant(name, append([]TenantOption{WithSMs(8), WithMemoryQuota(4 << 30)}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { t.Close() })
		return t
	}
	lists := newTenant("pooled", WithMemoryPool(0))
	bare := newTenant("driver-pool", WithMemoryPool(0), withoutFreeLists())
	const mib = 1 << 20
	pair := func(t *Tenant) func() error {
		return func() error {
			ptr, err := t.Alloc(ctx, mib)
			if err != nil {
				return err
			}
			return t.Free(ptr)
		}
	}
	c := p.dev.Primary()
	raw := func() error {
		ptr, err := p.drv.MemAlloc(c, mib)
		if err != nil {
			return err
		}
		return p.drv.MemFree(c, ptr)
	}
	// Serving code gives each request its own stream: 16 goroutines, each
	// allocating in order on a stream of its own.
	var streams []*Stream
	for range 16 {
		s, err := lists.NewStream(ClassDefault)
		if err != nil {
			b.Fatal(err)
		}
		streams = append(streams, s)
	}
	ownStream := func(i int) (func() error, func() error) {
		s := streams[i]
		return func() error {
			ptr, err := lists.AllocAsync(s, mib)
			if err != nil {
				return err
			}
			return lists.FreeAsync(s, ptr)
		}, nil
	}
	// Mixed sizes: each goroutine keeps up to 8 blocks of 4 KiB to 4 MiB
	// (log-uniform) and frees a random one when full, so blocks of many
	// classes are live and cached at once.
	mixed := func(alloc func(uint64) (DevicePtr, error), free func(DevicePtr) error) func(int) (func() error, func() error) {
		return func(i int) (func() error, func() error) {
			r := rand.New(rand.NewPCG(uint64(i), 1))
			var held []DevicePtr
			op := func() error {
				if len(held) == 8 {
					k := r.IntN(len(held))
					if err := free(held[k]); err != nil {
						return err
					}
					held[k] = held[len(held)-1]
					held = held[:len(held)-1]
				}
				ptr, err := alloc(uint64(4<<10) << r.IntN(11))
				if err == nil {
					held = append(held, ptr)
				}
				return err
			}
			done := func() error {
				var errs []error
				for _, ptr := range held {
					errs = append(errs, free(ptr))
				}
				return errors.Join(errs...)
			}
			return op, done
		}
	}
	type result struct{ mean, p99 float64 }
	got := map[string]result{}
	run := func(name string, g int, op func() error) {
		b.Run(name, func(b *testing.B) {
			m, q := latencies(b, g, op)
			got[name] = result{m, q}
		})
	}
	runEach := func(name string, g int, mk func(int) (func() error, func() error)) {
		b.Run(name, func(b *testing.B) {
			m, q := latenciesEach(b, g, mk)
			got[name] = result{m, q}
		})
	}
	for _, g := range []int{1, 16} {
		run(fmt.Sprintf("pool-%dg", g), g, pair(lists))
		run(fmt.Sprintf("driverpool-%dg", g), g, pair(bare))
		run(fmt.Sprintf("raw-%dg", g), g, raw)
	}
	runEach("pool-16g-own-streams", 16, ownStream)
	runEach("pool-16g-mixed", 16, mixed(func(n uint64) (DevicePtr, error) { return lists.Alloc(ctx, n) }, lists.Free))
	runEach("raw-16g-mixed", 16, mixed(func(n uint64) (DevicePtr, error) { q, err := p.drv.MemAlloc(c, n); return DevicePtr(q), err },
		func(ptr DevicePtr) error { return p.drv.MemFree(c, cuda.DevicePtr(ptr)) }))
	// The ratios, from the last (largest) run of each case.
	for _, row := range [][2]string{
		{"pool-1g", "raw-1g"}, {"driverpool-1g", "raw-1g"},
		{"pool-16g", "raw-16g"}, {"driverpool-16g", "raw-16g"}, {"pool-16g-own-streams", "raw-16g"},
		{"pool-16g-mixed", "raw-16g-mixed"},
	} {
		ours, base := got[row[0]], got[row[1]]
		if ours.mean == 0 || base.mean == 0 {
			continue
		}
		b.Logf("%-22s mean %9.2f us  P99 %9.2f us | %-14s mean %9.2f us  P99 %9.2f us | raw/ours: mean %7.1fx  P99 %7.1fx",
			row[0], ours.mean/1e3, ours.p99/1e3, row[1], base.mean/1e3, base.p99/1e3, base.mean/ours.mean, base.p99/ours.p99)
	}
}

// BenchmarkAllocOverhead interleaves tracked and raw 1 MiB alloc+free pairs
// in one loop, alternating which goes first, so that drift in the driver's
// allocator touches both alike, and reports each one's mean and median and
// the ratio of the medians.
func BenchmarkAllocOverhead(b *testing.B) {
	p := benchPool(b)
	t, err := p.NewTenant("t", WithSMs(8))
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	ctx, c := context.Background(), p.dev.Primary()
	tracked := make([]int64, 0, b.N)
	raw := make([]int64, 0, b.N)
	trackedPair := func() (time.Duration, error) {
		t0 := time.Now()
		ptr, err := t.Alloc(ctx, 1<<20)
		if err == nil {
			err = t.Free(ptr)
		}
		return time.Since(t0), err
	}
	rawPair := func() (time.Duration, error) {
		t0 := time.Now()
		ptr, err := p.drv.MemAlloc(c, 1<<20)
		if err == nil {
			err = p.drv.MemFree(c, ptr)
		}
		return time.Since(t0), err
	}
	for i := 0; i < b.N; i++ {
		// Alternate which goes first, so that neither always follows the
		// other's free.
		first, second := trackedPair, rawPair
		if i%2 == 1 {
			first, second = rawPair, trackedPair
		}
		d1, err := first()
		if err != nil {
			b.Fatal(err)
		}
		d2, err := second()
		if err != nil {
			b.Fatal(err)
		}
		if i%2 == 1 {
			d1, d2 = d2, d1
		}
		tracked, raw = append(tracked, int64(d1)), append(raw, int64(d2))
	}
	med := func(v []int64) float64 { slices.Sort(v); return float64(v[len(v)/2]) }
	mean := func(v []int64) float64 {
		var s int64
		for _, x := range v {
			s += x
		}
		return float64(s) / float64(len(v))
	}
	b.ReportMetric(mean(tracked)/1e3, "tracked-mean-us")
	b.ReportMetric(mean(raw)/1e3, "raw-mean-us")
	mt, mr := med(tracked), med(raw)
	b.ReportMetric(mt/1e3, "tracked-median-us")
	b.ReportMetric(mr/1e3, "raw-median-us")
	b.ReportMetric(mt/mr, "median-ratio")
}
