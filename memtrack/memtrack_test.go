package memtrack

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

const (
	kiB = 1 << 10
	miB = 1 << 20
	giB = 1 << 30
)

func mustTracker(t testing.TB, limit uint64) *Tracker {
	t.Helper()
	tr, err := New(limit)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustAccount(t testing.TB, tr *Tracker, name string, limit uint64) *Account {
	t.Helper()
	a, err := tr.NewAccount(name, limit)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// wantErr checks errors.Is and that the text names what was wrong and what
// is allowed.
func wantErr(t *testing.T, err, target error, substrs ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v: want errors.Is %v", err, target)
	}
	for _, s := range substrs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name    string
		do      func(tr *Tracker, a *Account) error
		target  error
		substrs []string
	}{
		{"New zero limit", func(*Tracker, *Account) error { _, err := New(0); return err },
			ErrInvalidLimit, []string{"device limit is 0 bytes", "at least 1 byte"}},
		{"NewAccount zero limit", func(tr *Tracker, _ *Account) error { _, err := tr.NewAccount("x", 0); return err },
			ErrInvalidLimit, []string{`"x"`, "0 bytes", "at least 1 byte"}},
		{"SetLimit zero", func(_ *Tracker, a *Account) error { return a.SetLimit(0) },
			ErrInvalidLimit, []string{"0 bytes", "at least 1 byte"}},
		{"Reserve zero", func(_ *Tracker, a *Account) error { return a.reserve(0) },
			ErrInvalidSize, []string{"requested 0 bytes", "at least 1 byte"}},
		{"Reserve too large", func(_ *Tracker, a *Account) error { return a.reserve(1 << 60) },
			ErrInvalidSize, []string{"1152921504606846976 bytes", "at most 281474976710655 bytes"}},
		{"Record zero", func(_ *Tracker, a *Account) error { return a.record(0x1000, 0) },
			ErrInvalidSize, []string{"requested 0 bytes"}},
		{"Release unknown", func(_ *Tracker, a *Account) error { _, err := a.Release(0xdead000); return err },
			ErrUnknownPointer, []string{"0xdead000"}},
		{"Reserve over tenant", func(_ *Tracker, a *Account) error { return a.reserve(2 * giB) },
			ErrQuotaExceeded, []string{"requested 2147483648 bytes", "0 of 1073741824 bytes used", "tenant limit", "at most 1073741824 more"}},
		{"Reserve over device", func(tr *Tracker, _ *Account) error {
			b, _ := tr.NewAccount("big", 8*giB)
			return b.reserve(3 * giB)
		}, ErrQuotaExceeded, []string{"requested 3221225472 bytes", "of 2147483648 bytes used", "device limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := mustTracker(t, 2*giB)
			a := mustAccount(t, tr, "a", 1*giB)
			err := tt.do(tr, a)
			wantErr(t, err, tt.target, tt.substrs...)
			if tt.name != "NewAccount zero limit" && strings.Contains(err.Error(), `"`) {
				t.Errorf("%q names an account: the caller names it (fcsp's TenantError)", err)
			}
			if tr.Used() != 0 || a.Used() != 0 {
				t.Fatalf("failed call changed counters: device %d, tenant %d", tr.Used(), a.Used())
			}
		})
	}
}

func TestQuotaErrorFields(t *testing.T) {
	tr := mustTracker(t, 10*miB)
	a := mustAccount(t, tr, "a", 4*miB)
	b := mustAccount(t, tr, "b", 100*miB) // above the device limit: allowed
	if err := a.reserve(3 * miB); err != nil {
		t.Fatal(err)
	}
	var qe *QuotaError
	if err := a.reserve(2 * miB); !errors.As(err, &qe) {
		t.Fatalf("got %v, want *QuotaError", err)
	}
	if *qe != (QuotaError{Tenant: "a", Requested: 2 * miB, Used: 3 * miB, Limit: 4 * miB, Scope: ScopeTenant}) {
		t.Errorf("tenant QuotaError = %+v", *qe)
	}
	if err := b.reserve(8 * miB); !errors.As(err, &qe) {
		t.Fatalf("got %v, want *QuotaError", err)
	}
	if *qe != (QuotaError{Tenant: "b", Requested: 8 * miB, Used: 3 * miB, Limit: 10 * miB, Scope: ScopeDevice}) {
		t.Errorf("device QuotaError = %+v", *qe)
	}
	if b.Used() != 0 || tr.Used() != 3*miB {
		t.Errorf("after device rejection: tenant %d, device %d", b.Used(), tr.Used())
	}
	if err := b.reserve(7 * miB); err != nil { // exactly fills the device
		t.Fatal(err)
	}
	if tr.Used() != tr.Limit() {
		t.Errorf("device used %d, want %d", tr.Used(), tr.Limit())
	}
}

func TestReleaseUnknownChangesNothing(t *testing.T) {
	tr := mustTracker(t, giB)
	a := mustAccount(t, tr, "a", giB)
	b := mustAccount(t, tr, "b", giB)
	for ptr, n := range map[uint64]uint64{0x1000: 4 * kiB, 0x2000: 8 * kiB} {
		if err := a.reserve(n); err != nil {
			t.Fatal(err)
		}
		if err := a.record(ptr, n); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string) {
		t.Helper()
		if a.Used() != 12*kiB || b.Used() != 0 || tr.Used() != 12*kiB || len(a.Live()) != 2 {
			t.Fatalf("%s changed state: a=%d b=%d device=%d live=%v", step, a.Used(), b.Used(), tr.Used(), a.Live())
		}
	}
	check("setup")
	for _, tc := range []struct {
		name string
		acct *Account
		ptr  uint64
	}{
		{"never recorded", a, 0x3000},
		{"other tenant's pointer", b, 0x1000},
		{"interior pointer", a, 0x1008},
	} {
		if _, err := tc.acct.Release(tc.ptr); !errors.Is(err, ErrUnknownPointer) {
			t.Errorf("%s: got %v, want ErrUnknownPointer", tc.name, err)
		}
		check(tc.name)
	}
	if n, err := a.Release(0x1000); err != nil || n != 4*kiB {
		t.Fatalf("Release = %d, %v", n, err)
	}
	used := tr.Used()
	if _, err := a.Release(0x1000); !errors.Is(err, ErrUnknownPointer) {
		t.Errorf("double free: got %v", err)
	}
	if tr.Used() != used || a.Used() != used {
		t.Errorf("double free changed counters")
	}
	if err := a.record(0x2000, 1); err == nil || !strings.Contains(err.Error(), "already recorded") {
		t.Errorf("duplicate Record: got %v", err)
	}
}

func TestMemInfo(t *testing.T) {
	tests := []struct {
		limit, used, devFree, devTotal uint64
		wantFree, wantTotal            uint64
	}{
		{limit: 4 * giB, used: 1 * giB, devFree: 80 * giB, devTotal: 80 * giB, wantFree: 3 * giB, wantTotal: 4 * giB},
		{limit: 4 * giB, used: 1 * giB, devFree: 1 * giB, devTotal: 80 * giB, wantFree: 1 * giB, wantTotal: 4 * giB}, // others use the device
		{limit: 100 * giB, used: 0, devFree: 60 * giB, devTotal: 80 * giB, wantFree: 60 * giB, wantTotal: 80 * giB},  // limit above device
		{limit: 4 * giB, used: 4 * giB, devFree: 9 * giB, devTotal: 80 * giB, wantFree: 0, wantTotal: 4 * giB},
		{limit: 2 * giB, used: 4 * giB, devFree: 9 * giB, devTotal: 80 * giB, wantFree: 0, wantTotal: 2 * giB}, // limit lowered below usage
	}
	for _, tt := range tests {
		tr := mustTracker(t, 1<<40)
		a := mustAccount(t, tr, "a", max(tt.limit, tt.used))
		if tt.used > 0 {
			if err := a.reserve(tt.used); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.SetLimit(tt.limit); err != nil {
			t.Fatal(err)
		}
		free, total := a.MemInfo(tt.devFree, tt.devTotal)
		if free != tt.wantFree || total != tt.wantTotal {
			t.Errorf("%+v: MemInfo = %d, %d", tt, free, total)
		}
	}
}

func TestSetLimitLowerBelowUsage(t *testing.T) {
	tr := mustTracker(t, giB)
	a := mustAccount(t, tr, "a", giB)
	if err := a.reserve(100 * miB); err != nil {
		t.Fatal(err)
	}
	if err := a.SetLimit(50 * miB); err != nil {
		t.Fatal(err)
	}
	if err := a.reserve(1); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("got %v", err)
	}
	a.unreserve(100 * miB)
	if err := a.reserve(50 * miB); err != nil {
		t.Fatal(err)
	}
}

func TestUnreserveClamps(t *testing.T) {
	tr := mustTracker(t, giB)
	a := mustAccount(t, tr, "a", giB)
	b := mustAccount(t, tr, "b", giB)
	_ = b.reserve(10)
	_ = a.reserve(10)
	a.unreserve(100) // caller bug: must not underflow or steal b's bytes
	if a.Used() != 0 || tr.Used() != 10 {
		t.Fatalf("a=%d device=%d", a.Used(), tr.Used())
	}
}

func TestClose(t *testing.T) {
	tr := mustTracker(t, giB)
	a := mustAccount(t, tr, "a", giB)
	b := mustAccount(t, tr, "b", giB)
	_ = b.reserve(kiB)
	for i := uint64(1); i <= 3; i++ {
		_ = a.reserve(i * kiB)
		_ = a.record(i<<20, i*kiB)
	}
	_ = a.reserve(100) // reserved, never recorded
	if tr.Accounts() != 2 {
		t.Fatalf("Accounts = %d", tr.Accounts())
	}
	leaked, err := a.Close()
	if err != nil || leaked != 6*kiB+100 {
		t.Fatalf("Close = %d, %v", leaked, err)
	}
	if tr.Used() != kiB || tr.Accounts() != 1 || len(a.Live()) != 0 {
		t.Fatalf("after Close: device %d, accounts %d, live %v", tr.Used(), tr.Accounts(), a.Live())
	}
	if _, err := a.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if err := a.reserve(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Reserve after Close: %v", err)
	}
	if err := a.record(1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close: %v", err)
	}
	if _, err := a.Release(1 << 20); !errors.Is(err, ErrClosed) {
		t.Errorf("Release after Close: %v", err)
	}
	// The id is recycled; the new account must not see a's records.
	c := mustAccount(t, tr, "c", giB)
	if c.id != a.id || len(c.Live()) != 0 {
		t.Errorf("recycled id %d (a had %d), live %v", c.id, a.id, c.Live())
	}
}

// TestStorm races reservations, records, releases, unreserves, bogus frees
// and limit changes across goroutines and accounts whose limits sum to more
// than the device. Every successful Reserve checks that no counter is above
// its limit, and an independent per-scope sum of reservations held at the
// same instant (incremented after a successful Reserve, decremented before
// the release) must never pass a limit: any value it reaches is a sum of
// reservations that were all held at once.
func TestStorm(t *testing.T) {
	const (
		devLimit = 64 * miB
		tenants  = 6
		workers  = 24
	)
	ops := 50000
	if testing.Short() || raceEnabled { // the race detector slows each op tenfold; 5000 still interleave 24 workers
		ops = 5000
	}
	tr := mustTracker(t, devLimit)
	accts := make([]*Account, tenants)
	held := make([]atomic.Int64, tenants) // independent per-tenant sums
	raiseMu := make([]sync.Mutex, tenants)
	var devHeld, devHigh atomic.Int64
	for i := range accts {
		accts[i] = mustAccount(t, tr, string(rune('a'+i)), uint64(16+i*4)*miB)
	}
	var nextPtr atomic.Uint64
	var admitted, rejected atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan string, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 42))
			type alloc struct {
				a        int
				ptr, n   uint64
				recorded bool
			}
			var mine []alloc
			fail := func(s string) {
				select {
				case errc <- s:
				default:
				}
			}
			drop := func(i int) {
				x := mine[i]
				mine[i] = mine[len(mine)-1]
				mine = mine[:len(mine)-1]
				held[x.a].Add(-int64(x.n))
				devHeld.Add(-int64(x.n))
				if x.recorded {
					if n, err := accts[x.a].Release(x.ptr); err != nil || n != x.n {
						fail("Release: " + err.Error())
					}
				} else {
					accts[x.a].unreserve(x.n)
				}
			}
			for i := 0; i < ops; i++ {
				switch r := rng.IntN(100); {
				case r < 55:
					ai := rng.IntN(tenants)
					a := accts[ai]
					n := 1 + rng.Uint64N(4*miB)
					if err := a.reserve(n); err != nil {
						if !errors.Is(err, ErrQuotaExceeded) {
							fail("Reserve: " + err.Error())
						}
						rejected.Add(1)
						continue
					}
					admitted.Add(1)
					if u, l := a.Used(), a.Limit(); u > l {
						fail("tenant counter above limit")
					}
					if tr.Used() > tr.Limit() {
						fail("device counter above limit")
					}
					if h := held[ai].Add(int64(n)); uint64(h) > a.Limit() {
						fail("tenant limit passed by held reservations")
					}
					d := devHeld.Add(int64(n))
					if d > devLimit {
						fail("device limit passed by held reservations")
					}
					for {
						h := devHigh.Load()
						if d <= h || devHigh.CompareAndSwap(h, d) {
							break
						}
					}
					x := alloc{a: ai, n: n}
					if rng.IntN(4) != 0 { // the "driver" succeeded
						x.ptr = nextPtr.Add(1) << 12
						if err := a.record(x.ptr, n); err != nil {
							fail("Record: " + err.Error())
						}
						x.recorded = true
					}
					mine = append(mine, x)
				case r < 95:
					if len(mine) > 0 {
						drop(rng.IntN(len(mine)))
					}
				case r < 98:
					// Free of a pointer nobody owns, or someone else's.
					a := accts[rng.IntN(tenants)]
					if _, err := a.Release(nextPtr.Load()<<12 + 1); !errors.Is(err, ErrUnknownPointer) {
						fail("bogus Release succeeded")
					}
				default:
					// Only raise limits (monotonic under raiseMu), so
					// the held-sum check against Limit() stays sound.
					ai := rng.IntN(tenants)
					raiseMu[ai].Lock()
					if l := accts[ai].Limit() + rng.Uint64N(miB); l > accts[ai].Limit() {
						_ = accts[ai].SetLimit(l)
					}
					raiseMu[ai].Unlock()
				}
			}
			for len(mine) > 0 {
				drop(len(mine) - 1)
			}
		}(uint64(w))
	}
	wg.Wait()
	close(errc)
	for s := range errc {
		t.Error(s)
	}
	t.Logf("admitted %d, rejected %d, device high water %d of %d", admitted.Load(), rejected.Load(), devHigh.Load(), devLimit)
	if rejected.Load() == 0 {
		t.Error("storm never hit a limit; it does not test admission")
	}
	if tr.Used() != 0 {
		t.Errorf("device used %d after storm, want 0", tr.Used())
	}
	for _, a := range accts {
		if a.Used() != 0 || len(a.Live()) != 0 {
			t.Errorf("tenant %s used %d live %d after storm", a.Name(), a.Used(), len(a.Live()))
		}
	}
}

// TestCloseRace closes accounts while their goroutines still allocate and
// checks that every byte goes back to the device exactly once.
func TestCloseRace(t *testing.T) {
	rounds := 50
	if testing.Short() {
		rounds = 10
	}
	tr := mustTracker(t, 256*miB)
	keep := mustAccount(t, tr, "keep", giB)
	_ = keep.reserve(miB)
	var nextPtr atomic.Uint64
	for r := 0; r < rounds; r++ {
		a := mustAccount(t, tr, "victim", 128*miB)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(r)))
				var ptrs []uint64
				for i := 0; i < 500; i++ {
					n := 1 + rng.Uint64N(miB)
					if a.reserve(n) != nil {
						continue
					}
					if rng.IntN(2) == 0 {
						a.unreserve(n)
						continue
					}
					p := nextPtr.Add(1) << 12
					if a.record(p, n) == nil {
						ptrs = append(ptrs, p)
					}
					if len(ptrs) > 4 {
						_, _ = a.Release(ptrs[0])
						ptrs = ptrs[1:]
					}
				}
			}(uint64(w))
		}
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = a.Close() }()
		wg.Wait()
		_, _ = a.Close()
		if tr.Used() != miB {
			t.Fatalf("round %d: device used %d after Close, want %d", r, tr.Used(), miB)
		}
	}
}

// TestSoak runs 1e6 alloc+free operations across 1024 accounts (1e5 with
// -short or -race) and checks that every counter ends at zero.
func TestSoak(t *testing.T) {
	const accounts = 1024
	ops := 1_000_000
	if testing.Short() || raceEnabled {
		ops = 100_000
	}
	tr := mustTracker(t, 1<<40)
	accts := make([]*Account, accounts)
	for i := range accts {
		accts[i] = mustAccount(t, tr, "t", 1<<32)
	}
	workers := 8
	var wg sync.WaitGroup
	var nextPtr atomic.Uint64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 7))
			type alloc struct {
				a   *Account
				ptr uint64
			}
			// A fixed ring of 64 outstanding allocations per worker:
			// each operation frees the oldest and allocates a new one.
			var ring [64]alloc
			for i := 0; i < ops/workers; i++ {
				x := &ring[i%len(ring)]
				if x.a != nil {
					if _, err := x.a.Release(x.ptr); err != nil {
						t.Error(err)
						return
					}
				}
				a := accts[rng.IntN(accounts)]
				n := 1 + rng.Uint64N(64*kiB)
				if err := a.reserve(n); err != nil {
					t.Error(err)
					return
				}
				p := nextPtr.Add(1) << 8
				if err := a.record(p, n); err != nil {
					t.Error(err)
					return
				}
				*x = alloc{a, p}
			}
			for _, x := range ring {
				if x.a == nil {
					continue
				}
				if _, err := x.a.Release(x.ptr); err != nil {
					t.Error(err)
				}
			}
		}(uint64(w))
	}
	wg.Wait()
	if tr.Used() != 0 {
		t.Fatalf("device used %d after soak", tr.Used())
	}
	for _, a := range accts {
		if a.Used() != 0 {
			t.Fatalf("account used %d after soak", a.Used())
		}
	}
}
