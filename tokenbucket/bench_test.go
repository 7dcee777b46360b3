package tokenbucket

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// Each benchmark runs the same work against this package (impl=tokenbucket)
// and golang.org/x/time/rate (impl=xrate), so the two can be compared from
// one run.

// unlimited returns both limiters configured so that they never refuse: the
// benchmarks then time the acquire path itself, not the rate.
func unlimited() (*Bucket, *rate.Limiter) {
	b, err := NewBucket(1e15, 1e15)
	if err != nil {
		panic(err)
	}
	return b, rate.NewLimiter(rate.Limit(1e15), 1<<40)
}

func BenchmarkTryAcquire(b *testing.B) {
	tb, xr := unlimited()
	b.Run("impl=tokenbucket", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !tb.TryAcquire(1) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("impl=xrate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !xr.AllowN(time.Now(), 1) {
				b.Fatal("refused")
			}
		}
	})
}

// BenchmarkTryAcquireParallel runs the acquire from 8 and 64 goroutines on
// one limiter and reports, besides ns/op (wall time per acquire across all
// goroutines), the P50 and P99 latency of a single acquire, sampled every
// 64th call so that the clock reads barely perturb the loop. A sample
// includes one clock read (~20 ns).
func BenchmarkTryAcquireParallel(b *testing.B) {
	for _, g := range []int{8, 64} {
		tb, xr := unlimited()
		impls := []struct {
			name string
			fn   func() bool
		}{
			{"tokenbucket", func() bool { return tb.TryAcquire(1) }},
			{"xrate", func() bool { return xr.AllowN(time.Now(), 1) }},
		}
		for _, impl := range impls {
			b.Run("goroutines="+itoa(g)+"/impl="+impl.name, func(b *testing.B) {
				benchParallel(b, g, impl.fn)
			})
		}
	}
}

func benchParallel(b *testing.B, goroutines int, acquire func() bool) {
	procs := runtime.GOMAXPROCS(0)
	if goroutines%procs != 0 {
		b.Skipf("%d goroutines is not a multiple of GOMAXPROCS=%d", goroutines, procs)
	}
	b.SetParallelism(goroutines / procs)
	b.ReportAllocs()
	var mu sync.Mutex
	var samples []int64
	b.RunParallel(func(pb *testing.PB) {
		local := make([]int64, 0, 4096)
		for i := 0; pb.Next(); i++ {
			if i&63 != 0 {
				acquire()
				continue
			}
			t0 := monotonic()
			acquire()
			local = append(local, monotonic()-t0)
		}
		mu.Lock()
		samples = append(samples, local...)
		mu.Unlock()
	})
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2]), "p50-ns")
	b.ReportMetric(float64(samples[len(samples)*99/100]), "p99-ns")
}

// BenchmarkAccuracy waits for one token at a time for a real second from a
// limiter configured at accuracyRate with burst 1, and reports
// admitted/configured as "ratio". A waiter that wakes late loses the
// lateness (burst 1 cannot bank it), so the ratio measures how precisely
// the limiter wakes its waiters.
func BenchmarkAccuracy(b *testing.B) {
	const accuracyRate = 100_000 // 10 µs per token
	// burst=1 measures how punctually each Wait returns (a late wake-up
	// loses its token for good); burst=100 (1 ms of tokens, as a Limiter's
	// stream bucket holds a refill period's worth) lets the bucket make up
	// for late wake-ups, which is how the SDK uses it. Each is measured over
	// a 1 s and a 10 ms window.
	for _, burst := range []float64{1, 100} {
		for _, window := range []time.Duration{time.Second, 10 * time.Millisecond} {
			name := fmt.Sprintf("burst=%g/window=%v", burst, window)
			b.Run(name, func(b *testing.B) { accuracy(b, accuracyRate, burst, window) })
		}
	}
}

// BenchmarkAccuracySlow is BenchmarkAccuracy's burst=1 case at 2,000 tokens a
// second (500 µs a token): waits a Go timer would serve, which wakes about
// a millisecond late in a process whose processors are idle (internal/nap).
func BenchmarkAccuracySlow(b *testing.B) {
	accuracy(b, 2_000, 1, 200*time.Millisecond)
}

// accuracy runs the bucket and x/time/rate at r tokens a second with the
// given burst, drained, each waiting for one token at a time for window,
// and reports admitted/configured as "ratio".
func accuracy(b *testing.B, r, burst float64, window time.Duration) {
	b.Run("impl=tokenbucket", func(b *testing.B) {
		for b.Loop() {
			tb, _ := NewBucket(r, burst)
			tb.TryAcquire(burst) // drain
			n := countFor(window, func(ctx context.Context) error { return tb.Wait(ctx, 1) })
			b.ReportMetric(float64(n)/(r*window.Seconds()), "ratio")
		}
	})
	b.Run("impl=xrate", func(b *testing.B) {
		for b.Loop() {
			xr := rate.NewLimiter(rate.Limit(r), int(burst))
			xr.AllowN(time.Now(), int(burst)) // drain
			n := countFor(window, func(ctx context.Context) error { return xr.WaitN(ctx, 1) })
			b.ReportMetric(float64(n)/(r*window.Seconds()), "ratio")
		}
	})
}

// countFor calls wait until window has passed and returns how many calls
// succeeded within it.
func countFor(window time.Duration, wait func(context.Context) error) int {
	ctx := context.Background()
	start := time.Now()
	n := 0
	for time.Since(start) < window {
		if wait(ctx) == nil && time.Since(start) < window {
			n++
		}
	}
	return n
}

// BenchmarkSetRateLag saturates a limiter at 1M tokens/s, lowers it to 10k
// tokens/s, and reports:
//   - lag-ns: from SetRate returning to the first refused acquire, i.e. how
//     long the old rate kept being enforced;
//   - next-ns: from SetRate to the next admission (the new interval is
//     100 µs);
//   - post-ratio: admissions in the 20 ms after SetRate over 1 + rate×20 ms.
func BenchmarkSetRateLag(b *testing.B) {
	const fast, slow = 1e6, 1e4
	const window = 20 * time.Millisecond
	type impl struct {
		try     func() bool
		setSlow func()
	}
	run := func(b *testing.B, mk func() impl) {
		var lag, next, ratio float64
		iters := 0
		for b.Loop() {
			im := mk()
			// Saturate at the fast rate for 2 ms.
			for end := monotonic() + int64(2*time.Millisecond); monotonic() < end; {
				im.try()
			}
			t0 := monotonic()
			im.setSlow()
			t1 := monotonic()
			refused, admittedAt := int64(-1), int64(-1)
			n := 0
			for monotonic()-t1 < int64(window) {
				ok := im.try()
				now := monotonic()
				switch {
				case !ok && refused < 0:
					refused = now
				case ok:
					n++
					if admittedAt < 0 {
						admittedAt = now
					}
				}
			}
			lag += float64(refused - t1)
			next += float64(admittedAt - t0)
			ratio += float64(n) / (1 + slow*window.Seconds())
			iters++
		}
		b.ReportMetric(lag/float64(iters), "lag-ns")
		b.ReportMetric(next/float64(iters), "next-ns")
		b.ReportMetric(ratio/float64(iters), "post-ratio")
	}
	b.Run("impl=tokenbucket", func(b *testing.B) {
		run(b, func() impl {
			tb, _ := NewBucket(fast, 1)
			return impl{func() bool { return tb.TryAcquire(1) }, func() { _ = tb.SetRate(slow) }}
		})
	})
	b.Run("impl=xrate", func(b *testing.B) {
		run(b, func() impl {
			xr := rate.NewLimiter(fast, 1)
			return impl{func() bool { return xr.AllowN(time.Now(), 1) }, func() { xr.SetLimit(slow) }}
		})
	})
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
