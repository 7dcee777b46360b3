package tokenbucket

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// The clock sources Go offers without linkname, beside the floors a limited
// admission is measured against (issue 19): a bare atomic add, and one clock
// read plus one CAS. Run: go test -run - -bench 'Clock|Floor|Admission' ./tokenbucket/
var sink int64

func BenchmarkClock(b *testing.B) {
	base := time.Now()
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
	})
	b.Run("time.Now.Sub", func(b *testing.B) {
		for b.Loop() {
			sink += int64(time.Now().Sub(base))
		}
	})
	b.Run("time.Since", func(b *testing.B) { // the package's default clock
		for b.Loop() {
			sink += int64(time.Since(base))
		}
	})
}

func BenchmarkFloor(b *testing.B) {
	var v atomic.Int64
	b.Run("atomic.Add", func(b *testing.B) {
		for b.Loop() {
			v.Add(1)
		}
	})
	b.Run("clock+CAS", func(b *testing.B) {
		for b.Loop() {
			now := monotonic()
			old := v.Load()
			v.CompareAndSwap(old, max(old, now)+1)
		}
	})
}

// BenchmarkAdmission is a limited stream's admission (stream bucket, then
// device bucket, one clock read) against an unlimited one's (the cost-0
// path fcsp takes for a stream without a bucket), on one goroutine.
func BenchmarkAdmission(b *testing.B) {
	l, err := New(Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 1, RefillPeriod: time.Nanosecond})
	if err != nil {
		b.Fatal(err)
	}
	s, err := l.NewStream(1)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("unlimited", func(b *testing.B) {
		for b.Loop() {
			_ = s.Wait(ctx, 0)
		}
	})
	b.Run("limited/Wait", func(b *testing.B) {
		for b.Loop() {
			if err := s.Wait(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("limited/TryAcquire", func(b *testing.B) {
		for b.Loop() {
			s.TryAcquire(1)
		}
	})
}
