package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/internal/hamibase"
	"github.com/fcsp-go/fcsp-go/memtrack"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// A target is one hot path (or floor, or baseline). setup builds fresh
// state for one cell (a goroutine count) and returns the call to time:
// op(g, i) is goroutine g's i-th call. An op that fails returns an error,
// which ends the run: a figure of a path that refused is not that path's.
type target struct {
	name  string // row label
	group string // floor, quota, alloc, rate
	vs    string // the row its ratio is taken against ("" for none)
	note  string
	setup func(goroutines int) (op func(g, i int) error, done func(), err error)
}

const tenants = 64 // accounts the quota rows spread goroutines over (g % 64)

// pad keeps a shared word on a line of its own, so the floors measure the
// word's contention and not false sharing with the harness's state.
type padded struct {
	_ [64]byte
	v atomic.Uint64
	_ [64]byte
}

var base = time.Now()

func targets() []target {
	return []target{
		{name: "atomic add, one shared word", group: "floor", note: "the charge of one shared device counter",
			setup: func(int) (func(int, int) error, func(), error) {
				w := new(padded)
				return func(int, int) error { w.v.Add(1); return nil }, nil, nil
			}},
		{name: "clock: time.Now()", group: "floor",
			setup: func(int) (func(int, int) error, func(), error) {
				return func(int, int) error {
					if time.Now().IsZero() { // a use of the reading that writes no shared word (-race clean)
						return errRefused
					}
					return nil
				}, nil, nil
			}},
		{name: "clock: time.Since(base)", group: "floor", vs: "clock: time.Now()", note: "monotonic only (no wall clock)",
			setup: func(int) (func(int, int) error, func(), error) {
				return func(int, int) error {
					if time.Since(base) < 0 {
						return errRefused
					}
					return nil
				}, nil, nil
			}},
		{name: "clock + CAS, one shared word", group: "floor", note: "time.Since then a CAS loop: a bucket's physical floor",
			setup: func(int) (func(int, int) error, func(), error) {
				w := new(padded)
				return func(int, int) error {
					now := uint64(time.Since(base))
					for {
						old := w.v.Load()
						if w.v.CompareAndSwap(old, max(old, now)+1) {
							return nil
						}
					}
				}, nil, nil
			}},

		// Memory quota: Reserve+Unreserve of 4 KiB on account g%64.
		{name: "quota check+release, leases", group: "quota", vs: "HAMi-style check+release", note: "memtrack Reserve+Unreserve 4 KiB, 64 tenants, device counter leased per tenant",
			setup: quotaSetup(nil, false)},
		{name: "quota check+release, one device counter", group: "quota", vs: "HAMi-style check+release", note: "same, WithLeaseChunk(0): every charge on the device counter (before issue 19)",
			setup: quotaSetup([]memtrack.Option{memtrack.WithLeaseChunk(0)}, false)},
		{name: "HAMi-style check+release", group: "quota", note: "internal/hamibase: one mutex, O(N) scan of 64 slots; Reserve+Unreserve 4 KiB",
			setup: hamiSetup(false)},
		{name: "quota cycle (Reserve+Record+Release), leases", group: "quota", vs: "HAMi-style cycle", note: "with the allocation record",
			setup: quotaSetup(nil, true)},
		{name: "HAMi-style cycle", group: "quota", note: "hamibase.Cycle",
			setup: hamiSetup(true)},

		// Tenant-level bookkeeping on the simulator.
		{name: "tenant Alloc+Free 1 MiB, simulator, memory pool", group: "alloc", note: "fcsp on the fake driver, 16 tenants, WithMemoryPool: cached block, no driver call; lifelock + quota + record + free list",
			setup: allocSetup},

		// Admission.
		{name: "tokenbucket Bucket.TryAcquire, shared", group: "rate", vs: "clock + CAS, one shared word", note: "one bucket for all goroutines, never refuses",
			setup: func(int) (func(int, int) error, func(), error) {
				b, err := tokenbucket.NewBucket(1e12, 1e12)
				if err != nil {
					return nil, nil, err
				}
				return func(int, int) error { return refused(b.TryAcquire(1)) }, nil, nil
			}},
		{name: "tokenbucket launch admission (Stream.TryAcquire)", group: "rate", vs: "clock + CAS, one shared word", note: "share-1 streams (fcsp's): the device tier alone, one CAS; one stream per goroutine, 1x1 launch cost",
			setup: limiterSetup},
		{name: "tokenbucket launch admission, one stream shared (Stream.TryAcquire)", group: "rate", vs: "mutex bucket (GCRA under sync.Mutex)", note: "issue 29: every goroutine on ONE share-1 stream (its lease), 1x1 launch cost",
			setup: sharedStreamSetup},
		{name: "mutex bucket (GCRA under sync.Mutex)", group: "rate", vs: "clock + CAS, one shared word", note: "plain mutex baseline",
			setup: func(int) (func(int, int) error, func(), error) {
				m := &mutexBucket{interval: 1, burst: int64(time.Hour)}
				return func(int, int) error { return refused(m.allow()) }, nil, nil
			}},
		{name: "x/time/rate Limiter.Allow", group: "rate", vs: "tokenbucket Bucket.TryAcquire, shared", note: "golang.org/x/time/rate, never refuses",
			setup: func(int) (func(int, int) error, func(), error) {
				l := rate.NewLimiter(rate.Limit(1e12), 1<<40)
				return func(int, int) error { return refused(l.Allow()) }, nil, nil
			}},
		{name: "go.uber.org/ratelimit Take", group: "rate", vs: "tokenbucket Bucket.TryAcquire, shared", note: "blocking API, 1e9/s so it never sleeps",
			setup: func(int) (func(int, int) error, func(), error) {
				l := ratelimit.New(1e9, ratelimit.Per(time.Second))
				return func(int, int) error { l.Take(); return nil }, nil, nil
			}},
	}
}

// errRefused is a limiter's refusal. The rates are set so that none should
// happen; measure counts them (a goroutine descheduled between its clock
// read and its compare-and-swap can see one) and the report lists them.
var errRefused = errors.New("refused")

func refused(ok bool) error {
	if !ok {
		return errRefused
	}
	return nil
}

func quotaSetup(opts []memtrack.Option, record bool) func(int) (func(int, int) error, func(), error) {
	return func(goroutines int) (func(int, int) error, func(), error) {
		tr, err := memtrack.New(1<<40, opts...)
		if err != nil {
			return nil, nil, err
		}
		accts := make([]*memtrack.Account, tenants)
		for i := range accts {
			if accts[i], err = tr.NewAccount(fmt.Sprint("t", i), 1<<36); err != nil {
				return nil, nil, err
			}
		}
		done := func() {
			for _, a := range accts {
				a.Close()
			}
		}
		if !record {
			return func(g, _ int) error {
				a := accts[g%tenants]
				r, err := a.Reserve(4096)
				if err != nil {
					return err
				}
				r.Cancel()
				return nil
			}, done, nil
		}
		return func(g, i int) error {
			a := accts[g%tenants]
			ptr := uint64(g)<<40 | uint64(i)<<12
			r, err := a.Reserve(4096)
			if err != nil {
				return err
			}
			if err := r.Commit(ptr); err != nil {
				return err
			}
			_, err = a.Release(ptr)
			return err
		}, done, nil
	}
}

// hamiSetup is the HAMi-style baseline on the same work: Reserve then
// Unreserve (check+release), or Reserve, Record, Release (cycle).
func hamiSetup(cycle bool) func(int) (func(int, int) error, func(), error) {
	return func(int) (func(int, int) error, func(), error) {
		h := hamibase.New(1<<40, tenants)
		return func(g, i int) error {
			s := g % tenants
			if cycle {
				if !h.Cycle(s, uint64(g)<<40|uint64(i)<<12, 4096) {
					return fmt.Errorf("hamibase refused")
				}
				return nil
			}
			if !h.Reserve(s, 4096) {
				return fmt.Errorf("hamibase refused")
			}
			h.Unreserve(s, 4096)
			return nil
		}, nil, nil
	}
}

func allocSetup(int) (func(int, int) error, func(), error) {
	ctx := context.Background()
	p, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		return nil, nil, err
	}
	const n = 16
	ts := make([]*fcsp.Tenant, n)
	for i := range ts {
		if ts[i], err = p.NewTenant(fmt.Sprint("t", i), fcsp.WithMemoryQuota(4<<30), fcsp.WithMemoryPool(1<<30)); err != nil {
			p.Close()
			return nil, nil, err
		}
	}
	return func(g, _ int) error {
			t := ts[g%n]
			d, err := t.Alloc(ctx, 1<<20)
			if err != nil {
				return err
			}
			return t.Free(d)
		}, func() {
			for _, t := range ts {
				t.Close()
			}
			p.Close()
		}, nil
}

func limiterSetup(goroutines int) (func(int, int) error, func(), error) {
	l, err := tokenbucket.New(tokenbucket.Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 1})
	if err != nil {
		return nil, nil, err
	}
	ss := make([]*tokenbucket.Stream, goroutines)
	for i := range ss {
		if ss[i], err = l.NewStream(1); err != nil {
			return nil, nil, err
		}
	}
	cost := l.Cost([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, stream.Default)
	return func(g, _ int) error { return refused(ss[g].TryAcquire(cost)) }, func() {
		for _, s := range ss {
			s.Close()
		}
	}, nil
}

// sharedStreamSetup is limiterSetup with one stream for all goroutines:
// the only stream of its limiter, so it admits from a lease.
func sharedStreamSetup(int) (func(int, int) error, func(), error) {
	l, err := tokenbucket.New(tokenbucket.Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 1})
	if err != nil {
		return nil, nil, err
	}
	s, err := l.NewStream(1)
	if err != nil {
		return nil, nil, err
	}
	cost := l.Cost([3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, stream.Default)
	return func(int, int) error { return refused(s.TryAcquire(cost)) }, func() { s.Close() }, nil
}

// mutexBucket is the plain baseline the issue names: GCRA (a theoretical
// arrival time) under one mutex.
type mutexBucket struct {
	mu       sync.Mutex
	tat      int64 // ns since base
	interval int64 // ns per token
	burst    int64 // ns of tokens
}

func (m *mutexBucket) allow() bool {
	now := int64(time.Since(base))
	m.mu.Lock()
	defer m.mu.Unlock()
	t := max(m.tat, now) + m.interval
	if t-now > m.burst {
		return false
	}
	m.tat = t
	return true
}
