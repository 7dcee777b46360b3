package lockorder

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// reported collects the violations of this package's tests.
var reported struct {
	mu   sync.Mutex
	msgs []string
}

func init() {
	Enable(func(msg string) {
		reported.mu.Lock()
		reported.msgs = append(reported.msgs, msg)
		reported.mu.Unlock()
	})
}

// since runs f and returns what it reported.
func since(f func()) []string {
	reported.mu.Lock()
	n := len(reported.msgs)
	reported.mu.Unlock()
	f()
	reported.mu.Lock()
	defer reported.mu.Unlock()
	return append([]string(nil), reported.msgs[n:]...)
}

// Taking two locks in their order is quiet; in the other order it is
// reported, naming both, with the stack that did it.
func TestWrongOrderIsReported(t *testing.T) {
	var pool Mutex[PoolMu]
	var tenant Mutex[TenantMu]
	require.Empty(t, since(func() {
		pool.Lock()
		tenant.Lock()
		tenant.Unlock()
		pool.Unlock()
	}))
	msgs := since(func() {
		tenant.Lock()
		pool.Lock()
		pool.Unlock()
		tenant.Unlock()
	})
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0], "tenancy Roster.mu (rank 4) taken while holding fcsp tenantCore.mu (rank 6)")
	require.Contains(t, msgs[0], "TestWrongOrderIsReported", "the stack of the goroutine that did it")

	var a, b Mutex[TenantMu]
	msgs = since(func() {
		a.Lock()
		b.Lock() // two tenants' locks: one rank, no order between them
		b.Unlock()
		a.Unlock()
	})
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0], "fcsp tenantCore.mu (rank 6) taken while holding fcsp tenantCore.mu (rank 6)")
}

// A TryLock waits for nothing: out of order it is quiet (the fault path
// names a tenant so), and what it took is held for the locks after it.
func TestTryLockMayGoOutOfOrder(t *testing.T) {
	var pool Mutex[PoolMu]
	var tenant, other Mutex[TenantMu]
	require.Empty(t, since(func() {
		tenant.Lock()
		require.True(t, pool.TryLock())
		pool.Unlock()
		tenant.Unlock()
	}))
	msgs := since(func() {
		require.True(t, tenant.TryLock())
		other.Lock()
		other.Unlock()
		tenant.Unlock()
	})
	require.Len(t, msgs, 1)
	require.True(t, pool.TryLock())
	require.False(t, pool.TryLock(), "held")
	pool.Unlock()
}

// A lock may be unlocked by another goroutine, as a sync.Mutex may: the
// goroutine that took it holds it no longer.
func TestUnlockFromAnotherGoroutine(t *testing.T) {
	var pool Mutex[PoolMu]
	var tenant Mutex[TenantMu]
	tenant.Lock()
	done := make(chan struct{})
	go func() { defer close(done); tenant.Unlock() }()
	<-done
	require.Empty(t, since(func() {
		pool.Lock()
		pool.Unlock()
	}), "tenant.mu is no longer this goroutine's")
}

// A driver call under a lock that allows none is reported; under one that
// allows it, or none, it is quiet.
func TestDriverCallUnderALock(t *testing.T) {
	var place Mutex[PoolProbe]
	var pool Mutex[PoolMu]
	require.Empty(t, since(func() {
		Driver("cuStreamCreate")
		place.Lock()
		Driver("cuGreenCtxCreate")
		place.Unlock()
	}))
	msgs := since(func() {
		pool.Lock()
		Driver("cuStreamCreate")
		pool.Unlock()
	})
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0], "driver call cuStreamCreate made while holding tenancy Roster.mu")
}

// A Sem is ranked as a Mutex is, and its wait ends with done. A move
// that waits for calls holding a lock other than the move lock is
// reported.
func TestSemAndDraining(t *testing.T) {
	var move Sem[PoolMove]
	move.Init()
	var pool Mutex[PoolMu]
	require.Empty(t, since(func() {
		require.True(t, move.Lock(nil))
		Draining()
		require.False(t, move.TryLock())
		done := make(chan struct{})
		close(done)
		got := make(chan bool)
		go func() { got <- move.Lock(done) }()
		require.False(t, <-got, "a wait that ends")
		move.Unlock()
	}))
	msgs := since(func() {
		pool.Lock()
		require.True(t, move.Lock(nil))
		move.Unlock()
		pool.Unlock()
	})
	require.Len(t, msgs, 1, "the move lock under the pool's lock")
	msgs = since(func() {
		require.True(t, move.TryLock())
		pool.Lock()
		Draining()
		pool.Unlock()
		move.Unlock()
	})
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0], "a move waits for calls in flight while holding tenancy Roster.mu")
}

// Every rank has a name for the reports.
func TestEveryRankIsNamed(t *testing.T) {
	for r := Rank(1); r < nranks; r++ {
		require.NotEmpty(t, ranks[r].name, "rank %d", r)
		require.False(t, strings.HasPrefix(r.String(), "rank "))
	}
	require.Equal(t, "rank 0", Rank(0).String())
}

// The check allocates nothing once warm: the SDK's allocation counts hold
// with it on.
func TestLockAllocatesNothing(t *testing.T) {
	var pool Mutex[PoolMu]
	var tenant Mutex[TenantMu]
	allocs := testing.AllocsPerRun(100, func() {
		pool.Lock()
		tenant.Lock()
		tenant.Unlock()
		pool.Unlock()
	})
	require.Zero(t, allocs)
}

// A lock taken twice by one goroutine would wait for ever: reported before
// it does (check is called here as Lock calls it, before it waits).
func TestTakenTwiceIsReported(t *testing.T) {
	var pool Mutex[PoolMu]
	pool.Lock()
	msgs := since(func() { check(unsafe.Pointer(&pool), rankPoolMu) })
	pool.Unlock()
	require.Len(t, msgs, 1)
	require.Contains(t, msgs[0], "tenancy Roster.mu taken twice by one goroutine")
}

// Disabled (production), a Mutex costs what a sync.Mutex does: the check
// is one load of a bool that never changes.
func BenchmarkLockUnlock(b *testing.B) {
	b.Run("sync.Mutex", func(b *testing.B) {
		var m sync.Mutex
		for b.Loop() {
			m.Lock()
			m.Unlock()
		}
	})
	b.Run("Mutex/disabled", func(b *testing.B) {
		on = false // this package's tests enabled it; no goroutine runs meanwhile
		defer func() { on = true }()
		var m Mutex[PoolMu]
		for b.Loop() {
			m.Lock()
			m.Unlock()
		}
	})
	b.Run("Mutex/enabled", func(b *testing.B) {
		var m Mutex[PoolMu]
		for b.Loop() {
			m.Lock()
			m.Unlock()
		}
	})
}

// A lock waited for is the waiter's only once it has it: the holder's
// unlock leaves the holder holding nothing, and the waiter holding it.
func TestContendedLockIsTheHolders(t *testing.T) {
	var pool Mutex[PoolMu]
	var tenant Mutex[TenantMu]
	tenant.Lock()
	got := make(chan struct{})
	release := make(chan struct{})
	go func() {
		tenant.Lock() // waits for the test's goroutine
		close(got)
		<-release
		tenant.Unlock()
	}()
	for {
		state.mu.Lock()
		n := len(state.held)
		state.mu.Unlock()
		if n == 1 {
			break // the waiter is waiting, recorded nowhere
		}
	}
	tenant.Unlock()
	<-got
	require.Empty(t, since(func() {
		pool.Lock() // this goroutine holds nothing now
		pool.Unlock()
	}))
	close(release)
}

// goid names a goroutine, the same at every call, and no other goroutine
// alive with it; so does stackID, goid's fallback.
func TestGoid(t *testing.T) {
	for _, id := range []func() uintptr{goid, stackID} {
		mine := id()
		require.NotZero(t, mine)
		require.Equal(t, mine, id())
		ids := make(chan uintptr)
		hold := make(chan struct{})
		for range 4 {
			go func() { ids <- id(); <-hold }()
		}
		seen := map[uintptr]bool{mine: true}
		for range 4 {
			g := <-ids
			require.False(t, seen[g], "two live goroutines named alike")
			seen[g] = true
		}
		close(hold)
	}
}

// docs/LOCKS.md's table of the order and the ranks say the same: the
// ranked locks, in their order, each marked alike in the driver column.
func TestLockMapIsTheRanks(t *testing.T) {
	doc, err := os.ReadFile("../../docs/LOCKS.md")
	require.NoError(t, err)
	var rows []string
	inOrder := false
	for line := range strings.Lines(string(doc)) {
		switch {
		case strings.HasPrefix(line, "## "):
			inOrder = strings.TrimSpace(line) == "## The order"
		case inOrder && strings.HasPrefix(line, "| ") && line[2] >= '0' && line[2] <= '9':
			rows = append(rows, line)
		}
	}
	require.Len(t, rows, int(nranks)-1, "one row per rank")
	for i, row := range rows {
		r := Rank(i + 1)
		cols := strings.Split(row, "|")
		require.Equal(t, strconv.Itoa(int(r)), strings.TrimSpace(cols[1]), "row %d's level", i+1)
		require.Equal(t, r.String(), strings.TrimSpace(cols[2]), "level %d", r)
		driver := strings.TrimSpace(cols[4])
		require.Equal(t, ranks[r].noDriver, strings.HasPrefix(driver, "no"), "level %d (%v): driver column %q", r, r, driver)
		require.True(t, strings.HasPrefix(driver, "no") || strings.HasPrefix(driver, "yes"), "level %d: %q", r, driver)
	}
}
