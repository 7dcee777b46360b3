package smpart_test

import (
	"sync"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// BenchmarkSlot: taking and giving back a green context (TryAcquire then
// Release), as every Do of a partitioned tenant does, beside a
// sync.Mutex's TryLock/Unlock (the exclusion it replaced) in the same run.
// Parallel: every goroutine of GOMAXPROCS doing the same on one partition
// with as many slots as goroutines (none waits), against one mutex (the
// goroutines take turns).
func BenchmarkSlot(b *testing.B) {
	drv := fake.New(fake.H200())
	dev, err := smpart.Open(drv, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	s, err := dev.Split(8)
	if err != nil {
		b.Fatal(err)
	}
	p, err := s.Take(16)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	p.SetSlots(smpart.MaxSlots)
	b.Run("slot", func(b *testing.B) {
		for b.Loop() {
			x, err := p.TryAcquire()
			if x == nil || err != nil {
				b.Fatal("no slot", err)
			}
			x.Release()
		}
	})
	b.Run("mutex", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			if !mu.TryLock() {
				b.Fatal("taken")
			}
			mu.Unlock()
		}
	})
	b.Run("slot-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				x, err := p.TryAcquire()
				if err != nil {
					b.Fatal(err)
				}
				if x == nil {
					continue // every slot taken this instant: the Do would wait
				}
				x.Release()
			}
		})
	})
	b.Run("mutex-parallel", func(b *testing.B) {
		var mu sync.Mutex
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				mu.Unlock() //nolint:staticcheck // the critical section is the point
			}
		})
	})
}
