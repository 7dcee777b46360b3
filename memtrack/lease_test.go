package memtrack

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

func leaseTracker(t testing.TB, limit, chunk uint64) *Tracker {
	t.Helper()
	tr, err := New(limit, WithLeaseChunk(chunk))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A tenant that holds a lease must not make another tenant's request fail
// while the device has room for it.
func TestLeaseNoFalseRefusal(t *testing.T) {
	const limit, chunk = 64 << 20, 1 << 20
	tr := leaseTracker(t, limit, chunk)
	a := mustAccount(t, tr, "a", limit)
	b := mustAccount(t, tr, "b", limit)

	// a allocates and frees: it keeps a chunk of device headroom leased.
	if err := a.reserve(4096); err != nil {
		t.Fatal(err)
	}
	a.unreserve(4096)
	if got := a.lease.Load(); got != chunk {
		t.Fatalf("a's lease = %d after a reserve and unreserve; want one chunk, %d", got, chunk)
	}
	if got := tr.Used(); got != 0 {
		t.Fatalf("device Used = %d with nothing allocated; want 0 (a lease is not use)", got)
	}
	// b asks for the whole device: a's lease must come back for it.
	if err := b.reserve(limit); err != nil {
		t.Fatalf("b.reserve(whole device) with nothing allocated: %v", err)
	}
	if got := tr.dev.Load(); got != limit {
		t.Fatalf("device counter = %d; want %d", got, limit)
	}
	// Now the device really is full: a is refused, at device scope.
	err := a.reserve(1)
	var qe *QuotaError
	if !errors.As(err, &qe) || qe.Scope != ScopeDevice || qe.Used != limit {
		t.Fatalf("a.reserve(1) on a full device = %v; want a device-scope QuotaError with Used %d", err, limit)
	}
	b.unreserve(limit)
	if err := a.reserve(limit); err != nil {
		t.Fatalf("a.reserve(whole device) after b gave it back: %v", err)
	}
	a.unreserve(limit)
	for _, acct := range []*Account{a, b} {
		if _, err := acct.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := tr.dev.Load(); got != 0 {
		t.Fatalf("device counter = %d after every account closed; want 0 (a lease stranded)", got)
	}
}

// Leases are taken only while every open account could hold one, so many
// small tenants do not lease the device away from a large request.
func TestLeaseChunkOnlyWithRoom(t *testing.T) {
	const limit, chunk = 4 << 20, 1 << 20
	tr := leaseTracker(t, limit, chunk)
	var accts []*Account
	for i := 0; i < 8; i++ { // 8 accounts x 1 MiB would be twice the device
		accts = append(accts, mustAccount(t, tr, "t", limit))
	}
	for _, a := range accts {
		if err := a.reserve(1); err != nil {
			t.Fatal(err)
		}
	}
	var leased uint64
	for _, a := range accts {
		leased += a.lease.Load()
	}
	if leased+8 > limit {
		t.Fatalf("leases total %d of a %d-byte device with 8 bytes allocated", leased, limit)
	}
	if leased != 0 {
		t.Fatalf("leases total %d; want none while 9 chunks do not fit in the device", leased)
	}
}

// Under a storm of tenants that allocate, free, close and reopen, the sum
// of allocations never passes the device limit, and since the demand is
// built to fit in the device, no request is ever refused at device scope.
func TestLeaseStormExactNoFalseRefusal(t *testing.T) {
	// Goroutines 0-7 share tenants 0-3 in pairs; 8-11 have tenants 4-7 of
	// their own, which they now and then close and reopen.
	owner := []int{0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7}
	const (
		tenants    = 8
		holdMax    = 1 << 20 // each goroutine holds at most this much
		limit      = 12 * holdMax
		chunk      = 256 << 10
		iterations = 3000
	)
	tr := leaseTracker(t, limit, chunk)
	var allocated atomic.Int64 // test-side: bytes between Reserve and Release
	var refused atomic.Int64
	var mu sync.Mutex
	accts := make([]*Account, tenants)
	for i := range accts {
		accts[i] = mustAccount(t, tr, "t", 2*holdMax)
	}
	var wg sync.WaitGroup
	for g := range owner {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			ti := owner[g]
			type hold struct{ ptr, n uint64 }
			var held []hold
			var sum uint64
			ptr := uint64(g) << 40
			for it := 0; it < iterations; it++ {
				mu.Lock()
				a := accts[ti]
				mu.Unlock()
				n := uint64(rng.IntN(512<<10) + 1)
				for sum+n > holdMax && len(held) > 0 { // free the oldest
					h := held[0]
					held = held[1:]
					sum -= h.n
					allocated.Add(-int64(h.n))
					if _, err := a.Release(h.ptr); err != nil {
						t.Error(err)
						return
					}
				}
				err := a.reserve(n)
				switch {
				case errors.Is(err, ErrClosed):
					t.Errorf("goroutine %d: Reserve on an account only it closes: %v", g, err)
					return
				case err != nil:
					refused.Add(1)
					t.Errorf("goroutine %d: Reserve(%d) with demand within the device: %v", g, n, err)
					return
				}
				if v := allocated.Add(int64(n)); v > limit {
					t.Errorf("allocations total %d; the device limit is %d", v, limit)
				}
				if d := tr.dev.Load(); d > limit {
					t.Errorf("device counter %d past the limit %d", d, limit)
				}
				ptr++
				if err := a.record(ptr, n); err != nil {
					t.Error(err)
					return
				}
				held = append(held, hold{ptr, n})
				sum += n
				if ti >= 4 && rng.IntN(300) == 0 { // close and reopen
					allocated.Add(-int64(sum)) // before Close gives them back
					mu.Lock()
					old := accts[ti]
					mu.Unlock()
					if leaked, err := old.Close(); err != nil || leaked != sum {
						t.Errorf("Close = %d, %v; want the %d bytes held", leaked, err, sum)
					}
					held, sum = nil, 0
					na := mustAccount(t, tr, "t", 2*holdMax)
					mu.Lock()
					accts[ti] = na
					mu.Unlock()
				}
			}
			for _, h := range held {
				allocated.Add(-int64(h.n))
				accts[ti].Release(h.ptr)
			}
		}(g)
	}
	wg.Wait()
	if refused.Load() > 0 {
		t.Fatalf("%d refusals with a demand that fits in the device", refused.Load())
	}
	for _, a := range accts {
		a.Close()
	}
	if d := tr.dev.Load(); d != 0 {
		t.Fatalf("device counter = %d after every account closed; want 0", d)
	}
	if u := tr.Used(); u != 0 {
		t.Fatalf("Used = %d after every account closed; want 0", u)
	}
}

// Close races reservations, releases and another tenant's sweep: no lease
// is stranded in a closed account, so the device counter ends at exactly
// the survivor's bytes plus its lease, and at zero once it closes too.
func TestLeaseCloseRace(t *testing.T) {
	const limit, chunk = 8 << 20, 256 << 10
	tr := leaseTracker(t, limit, chunk)
	keep := mustAccount(t, tr, "keep", limit)
	for r := 0; r < 40; r++ {
		a := mustAccount(t, tr, "victim", limit)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), uint64(r)))
				for i := 0; i < 300; i++ {
					n := 1 + rng.Uint64N(1<<20)
					if a.reserve(n) == nil {
						a.unreserve(n)
					}
				}
			}(w)
		}
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = a.Close() }()
		go func() { // a big request from the survivor sweeps the leases
			defer wg.Done()
			if keep.reserve(limit-(1<<20)) == nil {
				keep.unreserve(limit - (1 << 20))
			}
		}()
		wg.Wait()
		_, _ = a.Close()
		if d, l := tr.dev.Load(), keep.lease.Load(); d != l {
			t.Fatalf("round %d: device counter %d with nothing allocated and the survivor's lease %d: a lease was stranded", r, d, l)
		}
	}
	keep.Close()
	if d := tr.dev.Load(); d != 0 {
		t.Fatalf("device counter %d after every account closed; want 0", d)
	}
}

func TestLeaseChunkLargerThanDevice(t *testing.T) {
	_, err := New(1<<20, WithLeaseChunk(2<<20))
	wantErr(t, err, ErrInvalidLimit, "2097152", "1048576")
}
