package fcsp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkLaunchGraph: launching a graph of one captured kernel through
// a tenant stream (unlimited, limited by the launch-rate model, metered
// under a GPU share), synchronised every 1024.
func BenchmarkLaunchGraph(b *testing.B) {
	p := benchPool(b)
	for _, tc := range []struct {
		name string
		opt  TenantOption
	}{{"tenant", WithSMs(8)}, {"tenant-limited", WithSMLimit(1)}, {"tenant-share", WithGPUShare(1)}} {
		t, err := p.NewTenant(tc.name, WithSMs(8), tc.opt)
		if err != nil {
			b.Fatal(err)
		}
		fn := spinKernel(b, t)
		var args Args
		args.Uint64(0)
		one := Dim3{X: 1, Y: 1, Z: 1}
		ctx := context.Background()
		g, err := t.Stream().Capture(ctx, func() error { return t.Stream().Launch(ctx, fn, one, one, 0, &args) })
		if err != nil {
			b.Fatal(err)
		}
		e, err := g.Instantiate()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := t.Stream().LaunchGraph(ctx, e); err != nil {
					b.Fatal(err)
				}
				if i++; i%1024 == 0 {
					t.Stream().Synchronize()
				}
			}
			t.Stream().Synchronize()
		})
		e.Close()
		g.Close()
		t.Close()
	}
}

// TestLaunchGraphAllocatesNothing: a graph launch costs no garbage, as a
// kernel launch does (its launch-rate price was a closure, 24 B a launch,
// before admission priced the captured kernels itself).
func TestLaunchGraphAllocatesNothing(t *testing.T) {
	p, _ := openSim(t)
	for i, opts := range [][]TenantOption{{WithSMs(8)}, {WithSMs(8), WithSMLimit(1)}, {WithSMs(8), WithGPUShare(1)}} {
		tn, err := p.NewTenant(fmt.Sprint("t", i), opts...)
		require.NoError(t, err)
		fn := spinKernel(t, tn)
		var a Args
		a.Uint64(0)
		one := Dim3{X: 1, Y: 1, Z: 1}
		ctx := context.Background()
		s := tn.Stream()
		g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, one, one, 0, &a) })
		require.NoError(t, err)
		e, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, s.LaunchGraph(ctx, e)) // the probe
		allocs := testing.AllocsPerRun(200, func() {
			if err := s.LaunchGraph(ctx, e); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "tenant %v", opts)
		require.NoError(t, s.Synchronize())
		require.NoError(t, errors.Join(e.Close(), g.Close()))
		runtime.KeepAlive(tn) // see TestLaunchAllocatesNothing
	}
}
