package fcsp

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/kernels"
)

// BenchmarkReshape is the switch between pre-built layouts (8 <-> 32 SMs,
// the tenant's first stream and one more), idle and with a kernel queued
// on the old layout before each switch, and beside it, same run, what a
// switch costs without layouts: closing the tenant and making one of the
// new size (a green context built on the request path). Median and P99 are
// reported as p50-us and p99-us (goal: at most 50 us).
func BenchmarkReshape(b *testing.B) {
	ctx := context.Background()
	pctl := func(b *testing.B, d []time.Duration) {
		slices.Sort(d)
		if len(d) == 0 {
			return
		}
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, "p50-us")
		b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds())/1e3, "p99-us")
	}
	switchBench := func(queued bool) func(b *testing.B) {
		return func(b *testing.B) {
			p := benchPool(b)
			t, err := p.NewTenant("t", WithSMs(8), WithReshapeSizes(32))
			if err != nil {
				b.Fatal(err)
			}
			defer t.Close()
			if _, err := t.NewStream(ClassDefault); err != nil {
				b.Fatal(err)
			}
			mod, err := t.LoadModule(kernels.ChainPTX)
			if err != nil {
				b.Fatal(err)
			}
			fn, err := mod.Function("chain")
			if err != nil {
				b.Fatal(err)
			}
			buf, err := t.Alloc(ctx, 4<<16)
			if err != nil {
				b.Fatal(err)
			}
			var a Args
			a.Ptr(buf).Int32(256).Int32(16) // small: the fake runs kernels on the CPU
			var d []time.Duration
			sizes := [2]int{32, 8}
			for i := 0; b.Loop(); i++ {
				if queued {
					if err := t.Stream().Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &a); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				if err := t.Reshape(ctx, sizes[i%2]); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
			}
			b.StopTimer()
			if err := t.Stream().Synchronize(); err != nil {
				b.Fatal(err)
			}
			pctl(b, d)
		}
	}
	b.Run("layouts-idle", switchBench(false))
	b.Run("layouts-queued", switchBench(true))
	b.Run("baseline-new-tenant", func(b *testing.B) {
		p := benchPool(b)
		var d []time.Duration
		sizes := [2]int{32, 8}
		t, err := p.NewTenant("t", WithSMs(8))
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			t.Close()
			if t, err = p.NewTenant("t", WithSMs(sizes[i%2])); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		b.StopTimer()
		t.Close()
		pctl(b, d)
	})
}

// BenchmarkNewTenantAlone times NewTenant of a prewarmed 16-SM partition
// by itself (its Close, which recycles the partition, outside the timer),
// beside an unpartitioned tenant's, same run (goal: at most 10 us).
func BenchmarkNewTenantAlone(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{{"prewarmed-16", []TenantOption{WithSMs(16)}}, {"shared", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			p := benchPool(b, WithPrewarm(16))
			for i := 0; i < b.N; i++ {
				t, err := p.NewTenant("t", tc.opts...)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				t.Close()
				b.StartTimer()
			}
		})
	}
}
