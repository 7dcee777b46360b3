package tokenbucket

import (
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// BenchmarkAdmissionContended is launch admission under contention (issue
// 29): 16, 32 and 64 goroutines share ONE limited stream (share 1, as
// fcsp's are: the only stream of its limiter), against a GCRA bucket under
// a sync.Mutex and golang.org/x/time/rate on the same work. The limits are
// set never to refuse, so the path is timed, not the rate; P50 and P99 are
// of single calls sampled every 64th (see benchParallel).
func BenchmarkAdmissionContended(b *testing.B) {
	for _, g := range []int{16, 32, 64} {
		impls := []struct {
			name string
			mk   func(b *testing.B) func() bool
		}{
			{"tokenbucket", func(b *testing.B) func() bool {
				l, err := New(Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 1})
				if err != nil {
					b.Fatal(err)
				}
				s, err := l.NewStream(1)
				if err != nil {
					b.Fatal(err)
				}
				cost := l.Cost([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0)
				return func() bool { return s.TryAcquire(cost) }
			}},
			{"mutex", func(*testing.B) func() bool {
				m := &mutexBucket{interval: 1, burst: int64(time.Hour)}
				return m.allow
			}},
			{"xrate", func(*testing.B) func() bool {
				l := rate.NewLimiter(rate.Limit(1e12), 1<<40)
				return l.Allow
			}},
		}
		for _, impl := range impls {
			b.Run("goroutines="+itoa(g)+"/impl="+impl.name, func(b *testing.B) {
				acquire := impl.mk(b)
				var refused sync.Once
				benchParallel(b, g, func() bool {
					if !acquire() {
						refused.Do(func() { b.Error("refused: the limit was set never to refuse") })
					}
					return true
				})
			})
		}
	}
}

// mutexBucket is the plain baseline: GCRA (a theoretical arrival time)
// under one mutex, as cmd/hotpath's.
type mutexBucket struct {
	mu       sync.Mutex
	tat      int64 // ns since epoch
	interval int64 // ns per token
	burst    int64 // ns of tokens
}

func (m *mutexBucket) allow() bool {
	now := monotonic()
	m.mu.Lock()
	defer m.mu.Unlock()
	t := max(m.tat, now) + m.interval
	if t-now > m.burst {
		return false
	}
	m.tat = t
	return true
}
