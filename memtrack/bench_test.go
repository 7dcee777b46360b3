package memtrack

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/hamibase"
	"github.com/fcsp-go/fcsp-go/internal/shm"
)

// allocator abstracts ours and the baseline for the benchmarks: one
// complete allocation lifecycle (admit, record, free) on account i.
type allocator interface {
	cycle(i int, ptr uint64) bool
	accounts() int
}

type oursAlloc struct{ accts []*Account }

func (o oursAlloc) accounts() int { return len(o.accts) }
func (o oursAlloc) cycle(i int, ptr uint64) bool {
	a := o.accts[i]
	r, err := a.Reserve(4096)
	if err != nil {
		return false
	}
	if r.Commit(ptr) != nil {
		return false
	}
	_, err = a.Release(ptr)
	return err == nil
}

type hamiAllocator struct{ h *hamibase.Tracker }

func (h hamiAllocator) accounts() int { return h.h.Slots() }
func (h hamiAllocator) cycle(i int, ptr uint64) bool {
	if !h.h.Reserve(i, 4096) {
		return false
	}
	h.h.Record(i, ptr, 4096)
	return h.h.Release(i, ptr)
}

func newOurs(b *testing.B, n int) allocator {
	tr := mustTracker(b, 1<<40)
	o := oursAlloc{}
	for i := 0; i < n; i++ {
		o.accts = append(o.accts, mustAccount(b, tr, "t", 1<<36))
	}
	return o
}

var accountCounts = []int{1, 64, 1024}

// newOursShared is ours with the device total in a shared region of 16
// slots (the node-wide path).
func newOursShared(b *testing.B, n int) allocator {
	r, err := shm.Open(filepath.Join(b.TempDir(), "region"), shm.Layout{Devices: 1, Slots: 16}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	slot, err := r.Join(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	tr, err := New(1<<40, WithShared(mustShare(b, slot, 0)))
	if err != nil {
		b.Fatal(err)
	}
	o := oursAlloc{}
	for i := 0; i < n; i++ {
		o.accts = append(o.accts, mustAccount(b, tr, "t", 1<<36))
	}
	return o
}

var impls = []struct {
	name string
	mk   func(b *testing.B, n int) allocator
}{
	{"ours", newOurs},
	{"ours-shm16", newOursShared},
	{"hami", func(_ *testing.B, n int) allocator { return hamiAllocator{hamibase.New(1<<40, n)} }},
}

// BenchmarkAllocCycle: Reserve+Record+Release of one allocation, one
// goroutine, accounts used round-robin.
func BenchmarkAllocCycle(b *testing.B) {
	for _, im := range impls {
		for _, n := range accountCounts {
			b.Run(fmt.Sprintf("%s/accounts=%d", im.name, n), func(b *testing.B) {
				al := im.mk(b, n)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if !al.cycle(i%n, uint64(i)<<12) {
						b.Fatal("cycle failed")
					}
					i++
				}
			})
		}
	}
}

// BenchmarkReserveUnreserve: admission and its rollback, the path of an
// allocation the driver then refuses.
func BenchmarkReserveUnreserve(b *testing.B) {
	for _, n := range accountCounts {
		b.Run(fmt.Sprintf("ours/accounts=%d", n), func(b *testing.B) {
			o := newOurs(b, n).(oursAlloc)
			i := 0
			for b.Loop() {
				a := o.accts[i%n]
				r, err := a.Reserve(4096)
				if err != nil {
					b.Fatal(err)
				}
				r.Cancel()
				i++
			}
		})
	}
}

// BenchmarkAllocCycleParallel: the same lifecycle from GOMAXPROCS
// goroutines, each on its own accounts.
func BenchmarkAllocCycleParallel(b *testing.B) {
	for _, im := range impls {
		for _, n := range accountCounts {
			b.Run(fmt.Sprintf("%s/accounts=%d", im.name, n), func(b *testing.B) {
				al := im.mk(b, n)
				var seq atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					g := seq.Add(1)
					i := int(g)
					base := g << 40
					for pb.Next() {
						if !al.cycle(i%n, base+uint64(i)<<12) {
							b.Error("cycle failed")
							return
						}
						i++
					}
				})
			})
		}
	}
}

// BenchmarkLatency runs the lifecycle from a fixed number of goroutines
// and reports sampled per-operation latency percentiles. One operation in
// sampleEvery is timed, so the clock reads cost little.
func BenchmarkLatency(b *testing.B) {
	const sampleEvery = 8
	for _, im := range impls {
		for _, g := range []int{4, 64} {
			for _, n := range []int{64, 1024} {
				b.Run(fmt.Sprintf("%s/goroutines=%d/accounts=%d", im.name, g, n), func(b *testing.B) {
					al := im.mk(b, n)
					per := b.N/g + 1
					samples := make([][]int64, g)
					var wg sync.WaitGroup
					var start sync.WaitGroup
					start.Add(1)
					b.ResetTimer()
					for w := 0; w < g; w++ {
						wg.Add(1)
						go func(w int) {
							defer wg.Done()
							s := make([]int64, 0, per/sampleEvery+1)
							base := uint64(w) << 40
							start.Wait()
							for i := 0; i < per; i++ {
								acct, ptr := (w+i*g)%n, base+uint64(i)<<12
								if i%sampleEvery == 0 {
									t0 := time.Now()
									al.cycle(acct, ptr)
									s = append(s, int64(time.Since(t0)))
								} else {
									al.cycle(acct, ptr)
								}
							}
							samples[w] = s
						}(w)
					}
					start.Done()
					wg.Wait()
					b.StopTimer()
					all := slices.Concat(samples...)
					slices.Sort(all)
					if len(all) > 0 {
						b.ReportMetric(float64(all[len(all)*50/100]), "p50-ns")
						b.ReportMetric(float64(all[len(all)*99/100]), "p99-ns")
					}
				})
			}
		}
	}
}

// Record map candidates: the lock-free buckets we use, and a sharded Go map
// with a mutex per shard.
type shardedMap struct {
	shards [256]struct {
		mu sync.Mutex
		m  map[uint64]uint64
		_  [cacheLine - 16]byte
	}
}

func newShardedMap() *shardedMap {
	s := &shardedMap{}
	for i := range s.shards {
		s.shards[i].m = make(map[uint64]uint64)
	}
	return s
}

func (s *shardedMap) insert(ptr, w uint64) bool {
	sh := &s.shards[bucketOf(ptr)&255]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[ptr]; ok {
		return false
	}
	sh.m[ptr] = w
	return true
}

func (s *shardedMap) remove(ptr uint64, owner uint16) (uint64, bool) {
	sh := &s.shards[bucketOf(ptr)&255]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w, ok := sh.m[ptr]
	if !ok || wordOwner(w) != owner {
		return 0, false
	}
	delete(sh.m, ptr)
	return w, true
}

type recordStore interface {
	insert(ptr, w uint64) bool
	remove(ptr uint64, owner uint16) (uint64, bool)
}

// BenchmarkRecordMap inserts and removes records from GOMAXPROCS
// goroutines with `live` records per goroutine resident, the steady state
// of a process with that many outstanding allocations.
func BenchmarkRecordMap(b *testing.B) {
	stores := []struct {
		name string
		mk   func() recordStore
	}{
		{"lockfree", func() recordStore { return &recordMap{} }},
		{"sharded-mutex", func() recordStore { return newShardedMap() }},
	}
	for _, st := range stores {
		for _, live := range []int{16, 1024, 16384} {
			b.Run(fmt.Sprintf("%s/live=%d", st.name, live), func(b *testing.B) {
				m := st.mk()
				var seq atomic.Uint64
				b.RunParallel(func(pb *testing.PB) {
					g := seq.Add(1)
					base := g << 40
					ring := make([]uint64, live)
					for i := range ring {
						ring[i] = base + uint64(i)<<12
						m.insert(ring[i], packWord(4096, 1))
					}
					i := 0
					next := uint64(live)
					for pb.Next() {
						j := i % live
						if _, ok := m.remove(ring[j], 1); !ok {
							b.Error("remove")
							return
						}
						ring[j] = base + next<<12
						next++
						m.insert(ring[j], packWord(4096, 1))
						i++
					}
				})
			})
		}
	}
}

// BenchmarkDeviceCounter measures the shared device total alone under
// contention from all Ps: the most a delta-batching scheme could save.
func BenchmarkDeviceCounter(b *testing.B) {
	tr := mustTracker(b, 1<<40)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok, _ := tr.devReserve(4096); !ok {
				b.Error("devReserve")
				return
			}
			tr.devRelease(4096)
		}
	})
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
}
