package fcsp

import (
	"context"
	"testing"

	"github.com/fcsp-go/fcsp-go/kernels"
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
		mod, err := t.LoadModule(kernels.ChainPTX)
		if err != nil {
			b.Fatal(err)
		}
		fn, err := mod.Function("spin")
		if err != nil {
			b.Fatal(err)
		}
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
