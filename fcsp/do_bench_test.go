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
//
// The metered cases add what metering costs where it is asked for
// (WithGPUMetering, WithGPUShare): the call-site key (f's code pointer) and
// its estimate, the run's bookkeeping, polling the tenant's streams before
// admission under a share, and, where f takes a stream from Current, the
// two events of its bracket and their later query.
func BenchmarkDo(b *testing.B) {
	p := benchPool(b)
	for _, tc := range []struct {
		name string
		opts []TenantOption
		take bool // f takes the first stream's handle from Current
	}{
		{"partitioned", []TenantOption{WithSMs(16)}, false},
		{"unpartitioned", nil, false},
		// A warm-up (WithWarmup) on the commons: Take checks that it ran
		// in the context taken (place.Warming, chosen at NewTenant).
		{"unpartitioned-warmup", []TenantOption{WithWarmup(func(Current) error { return nil })}, false},
		{"unpartitioned-metered", []TenantOption{WithGPUMetering()}, false},
		{"unpartitioned-share", []TenantOption{WithGPUShare(0.5)}, false},
		{"partitioned-share", []TenantOption{WithSMs(16), WithGPUShare(0.5)}, false},
		// Taking a stream adds its bracket's two events. Metered, not
		// limited: an empty bracket on an idle stream measures the time
		// between its events (about Do's own), so a share would throttle
		// the loop and time the limit instead of the overhead.
		{"unpartitioned-metered-stream", []TenantOption{WithGPUMetering()}, true},
		{"partitioned-metered-stream", []TenantOption{WithSMs(16), WithGPUMetering()}, true},
	} {
		t, err := p.NewTenant("do-"+tc.name, tc.opts...)
		if err != nil {
			b.Fatal(err)
		}
		drv := p.drv
		f := func(Current) error { _, err := drv.CtxGetCurrent(); return err }
		if tc.take {
			f = func(cur Current) error {
				_, err := cur.Stream(nil)
				return err
			}
		}
		benchRawThenDo(b, tc.name, t, func() error { _, err := drv.CtxGetCurrent(); return err }, f)
		if err := t.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRawThenDo runs name/raw (one raw call through the binding, the
// baseline) and name/do (Do with f on t) as sub-benchmarks of b.
func benchRawThenDo(b *testing.B, name string, t *Tenant, raw func() error, f func(Current) error) {
	b.Run(name+"/raw", func(b *testing.B) {
		for b.Loop() {
			if err := raw(); err != nil {
				b.Fatal(err)
			}
		}
	})
	ctx := context.Background()
	b.Run(name+"/do", func(b *testing.B) {
		for b.Loop() {
			if err := t.Do(ctx, f); err != nil {
				b.Fatal(err)
			}
		}
	})
}
