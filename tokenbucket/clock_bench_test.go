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

// BenchmarkAdmissionVsFloor times the clock+CAS floor, an unlimited
// admission and a limited one in alternating blocks of the same loop, so
// that all three see the same load on a shared machine, and reports the
// limited admission's ns/op beside floor-ns, unlimited-ns (the stream's
// counter alone), bucket-ns (a bare Bucket.TryAcquire: one tier, no
// counters) and x-floor (limited / floor, issue 19's figure: goal at most
// 1.3). With -count 6 every run is one round. share=1 is fcsp's configuration (the device tier alone);
// share=0.5 charges the stream's own bucket too (two CASes).
func BenchmarkAdmissionVsFloor(b *testing.B) {
	for _, tc := range []struct {
		name  string
		share float64
		wait  bool
	}{
		{"share=1/TryAcquire", 1, false},
		{"share=1/Wait", 1, true},
		{"share=0.5/TryAcquire", 0.5, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := New(Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 1, RefillPeriod: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			s, err := l.NewStream(tc.share)
			if err != nil {
				b.Fatal(err)
			}
			bare, err := NewBucket(1e15, 1e15)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			limited := func() bool { return s.TryAcquire(1) }
			if tc.wait {
				limited = func() bool { return s.Wait(ctx, 1) == nil }
			}
			var w struct {
				_ [64]byte
				v atomic.Int64
				_ [64]byte
			}
			const block = 256
			var floor, unl, lim, bk time.Duration
			refused := 0
			b.ResetTimer()
			for done := 0; done < b.N; done += block {
				t0 := time.Now()
				for range block {
					now := monotonic()
					old := w.v.Load()
					w.v.CompareAndSwap(old, max(old, now)+1)
				}
				t1 := time.Now()
				for range block {
					_ = s.Wait(ctx, 0)
				}
				t2 := time.Now()
				for range block {
					if !limited() {
						refused++
					}
				}
				t3 := time.Now()
				for range block {
					if !bare.TryAcquire(1) {
						refused++
					}
				}
				t4 := time.Now()
				floor, unl, lim, bk = floor+t1.Sub(t0), unl+t2.Sub(t1), lim+t3.Sub(t2), bk+t4.Sub(t3)
			}
			if refused > 0 {
				b.Fatalf("%d limited admissions refused; the rate is set never to refuse", refused)
			}
			n := float64((b.N + block - 1) / block * block)
			b.ReportMetric(float64(lim)/n, "ns/op")
			b.ReportMetric(float64(floor)/n, "floor-ns")
			b.ReportMetric(float64(unl)/n, "unlimited-ns")
			b.ReportMetric(float64(bk)/n, "bucket-ns")
			b.ReportMetric(float64(lim)/float64(floor), "x-floor")
		})
	}
}
