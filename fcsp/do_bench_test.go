package fcsp

import (
	"context"
	"testing"
)

// BenchmarkDo is Do's cost per call (life lock, thread lock, the partition's
// exclusion, cuCtxGetCurrent and two cuCtxSetCurrent) beside the baseline
// of the same run: one raw call through the same binding (cuCtxGetCurrent),
// which f also makes. Do's overhead is do minus raw (goal: at most 1 us).
// On the CPU machine it measures the fake; on the H200, the driver.
func BenchmarkDo(b *testing.B) {
	p := benchPool(b)
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{{"partitioned", []TenantOption{WithSMs(16)}}, {"unpartitioned", nil}} {
		t, err := p.NewTenant("do-"+tc.name, tc.opts...)
		if err != nil {
			b.Fatal(err)
		}
		drv := p.drv
		b.Run(tc.name+"/raw", func(b *testing.B) {
			for b.Loop() {
				if _, err := drv.CtxGetCurrent(); err != nil {
					b.Fatal(err)
				}
			}
		})
		ctx := context.Background()
		f := func(Current) error { _, err := drv.CtxGetCurrent(); return err }
		b.Run(tc.name+"/do", func(b *testing.B) {
			for b.Loop() {
				if err := t.Do(ctx, f); err != nil {
					b.Fatal(err)
				}
			}
		})
		if err := t.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
