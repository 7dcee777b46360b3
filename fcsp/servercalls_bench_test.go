package fcsp

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkServerCalls is the CPU cost of each call a server makes between
// requests (the storm's kinds, issue 29), on a pool holding a partitioned
// class and a rest class as examples/storm does, beside the floors: a bare
// atomic add and a clock read. On the GPU machine the driver's share is in
// the figures; on the simulator only the SDK's own.
func BenchmarkServerCalls(b *testing.B) {
	p := benchPool(b)
	inter, err := p.NewTenant("inter", WithSMs(16))
	if err != nil {
		b.Fatal(err)
	}
	defer inter.Close()
	batch, err := p.NewTenant("batch", WithRestOfSMs())
	if err != nil {
		b.Fatal(err)
	}
	defer batch.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.Run("floor=atomic", func(b *testing.B) {
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("floor=clock", func(b *testing.B) {
		for b.Loop() {
			_ = time.Now()
		}
	})
	b.Run("call=MemGetInfo", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := inter.MemGetInfo(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("call=TenantStats", func(b *testing.B) {
		for b.Loop() {
			_ = inter.Stats()
		}
	})
	b.Run("call=PoolStats", func(b *testing.B) {
		for b.Loop() {
			_ = p.Stats()
		}
	})
	b.Run("call=NewStreamClose", func(b *testing.B) {
		for b.Loop() {
			s, err := inter.NewStream(ClassDefault)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("call=AllocFree", func(b *testing.B) {
		for b.Loop() {
			ptr, err := inter.Alloc(ctx, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			if err := inter.Free(ptr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("call=NewTenantClose", func(b *testing.B) {
		for b.Loop() {
			t, err := p.NewTenant("storm", WithMemoryQuota(64<<20))
			if err != nil {
				b.Fatal(err)
			}
			if err := t.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
