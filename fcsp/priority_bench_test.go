package fcsp

import (
	"context"
	"testing"
)

// What bandwidth accounting and the priority cost a metered launch, each
// beside its baseline in the same run: metered vs metered+LatencyCritical
// (busy counting, folding the launch into the bandwidth figures), and
// WithGPUShare(1) vs WithBandwidthFloor with no latency tenant busy (the
// floor's idle check). One launch per iteration, synchronised every 1024.
func BenchmarkLaunchPriority(b *testing.B) {
	p := benchPool(b)
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{
		{"metered", []TenantOption{WithGPUMetering()}},
		{"metered-latency", []TenantOption{WithPriority(LatencyCritical)}},
		{"share1", []TenantOption{WithGPUShare(1)}},
		{"share1-floored-idle", []TenantOption{WithBandwidthFloor(0.25)}},
	} {
		t, err := p.NewTenant(tc.name, append([]TenantOption{WithSMs(8)}, tc.opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		fn := spinKernel(b, t)
		var args Args
		args.Uint64(0)
		one := Dim3{X: 1, Y: 1, Z: 1}
		b.Run(tc.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := t.Stream().Launch(context.Background(), fn, one, one, 0, &args); err != nil {
					b.Fatal(err)
				}
				if i++; i%1024 == 0 {
					_ = t.Stream().Synchronize()
				}
			}
			_ = t.Stream().Synchronize()
		})
		_ = t.Close()
	}
}
