package tenancy

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// tenant is a listed tenant of the test: the roster keeps any comparable
// T.
type tenant struct{ name string }

// listed is a roster with the tenants named listed, as Make lists them.
func listed(names ...string) (*Roster[*tenant], []*tenant) {
	r := New[*tenant](smpart.NewSpares(nil))
	var ts []*tenant
	for _, n := range names {
		t := &tenant{n}
		r.tenants[n] = t
		ts = append(ts, t)
	}
	return r, ts
}

// The roster's bookkeeping: names sorted, a tenant found by name, the
// list read with the pool's state.
func TestRosterLists(t *testing.T) {
	r, ts := listed("b", "c", "a")
	require.Equal(t, []string{"a", "b", "c"}, r.Names())
	got, ok := r.Get("b")
	require.True(t, ok)
	require.Same(t, ts[0], got)
	_, ok = r.Get("d")
	require.False(t, ok)
	require.ElementsMatch(t, ts, r.List(nil))
	live, closed, free := r.Read(nil)
	require.ElementsMatch(t, ts, live)
	require.False(t, closed)
	require.Zero(t, free, "no split, no spares")
}

// Forget drops the tenant listed under the name, and not another that
// took the name since.
func TestForgetDropsOnlyItsTenant(t *testing.T) {
	r, ts := listed("a")
	r.Forget("a", &tenant{"a"})
	_, ok := r.Get("a")
	require.True(t, ok, "another tenant of that name is not forgotten")
	r.Forget("a", ts[0])
	_, ok = r.Get("a")
	require.False(t, ok)
}

// Close closes once: the first is given the live tenants, a later one is
// told it is not the first, and the roster says it is closed.
func TestCloseOnce(t *testing.T) {
	r, ts := listed("a", "b")
	live, spare, first := r.Close()
	require.True(t, first)
	require.NotNil(t, spare)
	require.ElementsMatch(t, ts, live)
	require.True(t, r.Closed())
	_, _, first = r.Close()
	require.False(t, first)
	require.ErrorIs(t, r.open(), errs.ErrClosed, "nothing is admitted or listed any more")
}

// TryFind names the tenant found, and gives up while the roster's lock is
// held (the fault path must not wait for it).
func TestTryFindOnlyTries(t *testing.T) {
	r, _ := listed("a", "b")
	require.Equal(t, "b", r.TryFind(func(c *tenant) bool { return c.name == "b" }))
	require.Empty(t, r.TryFind(func(*tenant) bool { return false }))
	r.mu.Lock()
	require.Empty(t, r.TryFind(func(*tenant) bool { return true }), "the lock is held: no name")
	r.mu.Unlock()
}
