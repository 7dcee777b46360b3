package fcsp

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
)

// This package's tests run with the lock order checked (internal/lockorder,
// docs/LOCKS.md): every ranked lock taken is checked against those its
// goroutine holds, and every driver call of a simulated pool (lockWatch)
// against the locks no driver call may be made under. A violation is
// printed with its stack, and fails the test whose pool saw it (openSim).
// A test that provokes violations on purpose hears them instead
// (captureLockReports), so that they reach no one's terminal.
//
// A benchmark run (-test.bench) leaves it off: its figures are production's.
func init() {
	if benchmarking(os.Args[1:]) {
		return
	}
	lockorder.Enable(lockReports.report)
}

// lockReports is where the check's reports go: stderr, or the test that
// captures them.
var lockReports reportSink

type reportSink struct {
	mu      sync.Mutex
	capture *[]string // nil: stderr
}

func (r *reportSink) report(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.capture != nil {
		*r.capture = append(*r.capture, msg)
		return
	}
	fmt.Fprintln(os.Stderr, msg)
}

// captureLockReports keeps the check's reports from stderr until t ends
// and returns what it heard: for a test that provokes violations.
func captureLockReports(t testing.TB) func() []string {
	var got []string
	lockReports.mu.Lock()
	lockReports.capture = &got
	lockReports.mu.Unlock()
	t.Cleanup(func() {
		lockReports.mu.Lock()
		lockReports.capture = nil
		lockReports.mu.Unlock()
	})
	return func() []string {
		lockReports.mu.Lock()
		defer lockReports.mu.Unlock()
		return append([]string(nil), got...)
	}
}

// benchmarking reports whether args ask for benchmarks (-test.bench=x, or
// -test.bench x): the flags are not parsed yet when init runs.
func benchmarking(args []string) bool {
	for i, a := range args {
		a = strings.TrimPrefix(a, "-")
		switch {
		case strings.HasPrefix(a, "-test.bench="), strings.HasPrefix(a, "test.bench="):
			return !strings.HasSuffix(a, "=")
		case a == "-test.bench" || a == "test.bench":
			return i+1 < len(args) && args[i+1] != ""
		}
	}
	return false
}

// skipUnchecked skips a test of the check itself in a benchmark run.
func skipUnchecked(t testing.TB) {
	if !lockorder.Enabled() {
		t.Skip("a benchmark run: the lock order is not checked")
	}
}

// lockWatch is the guard a simulated pool's driver calls go through
// (simulator), before the pool's own: it reports a driver call made under
// a lock that allows none.
type lockWatch struct{}

func (lockWatch) Refuse(op string) error { lockorder.Driver(op); return nil }

func (lockWatch) See(_ string, _ cuda.Context, _ cuda.Stream, err error) error { return err }

// simFake is a simulated pool's fake driver, under the pool's guard and,
// where the check is on, lockWatch's.
func simFake(p *Pool) *fake.Driver {
	d := p.drv.(*cuda.Guard).Unwrap()
	if g, ok := d.(*cuda.Guard); ok {
		d = g.Unwrap()
	}
	return d.(*fake.Driver)
}

// checkLockOrder fails t if a lock was taken out of order, or a driver call
// made under a lock that allows none, from now until t ends.
func checkLockOrder(t testing.TB) {
	before := lockorder.Violations()
	t.Cleanup(func() {
		require.Zero(t, lockorder.Violations()-before, "lock order violated (the report, with its stack, is on stderr)")
	})
}

// The check is on in this package: the pool's lock (its roster's,
// internal/tenancy) taken under a tenant's (the wrong order:
// docs/LOCKS.md) is reported, and so is a driver call made under the
// pool's lock.
func TestLockOrderIsChecked(t *testing.T) {
	skipUnchecked(t)
	p, err := openSimErr(0) // not openSim: its check would fail this test
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	tn, err := p.NewTenant("a")
	require.NoError(t, err)
	heard := captureLockReports(t) // provoked: the test's to read, not stderr's
	before := lockorder.Violations()
	tn.c.mu.Lock()
	_ = p.Tenants() // under the pool's lock
	tn.c.mu.Unlock()
	require.Equal(t, before+1, lockorder.Violations(), "the pool's lock under a tenant's mu")
	p.tenants.TryFind(func(*tenantCore) bool { // is runs under the pool's lock
		_, err = p.drv.StreamCreate(p.dev.Primary(), cuda.StreamNonBlocking)
		return true
	})
	require.NoError(t, err)
	require.Equal(t, before+2, lockorder.Violations(), "a driver call under the pool's lock")
	reports := heard()
	require.Len(t, reports, 2)
	require.Contains(t, reports[0], "lock order: tenancy Roster.mu (rank 4) taken while holding fcsp tenantCore.mu (rank 6)")
	require.Contains(t, reports[1], "lock order: driver call cuStreamCreate made while holding tenancy Roster.mu")
	require.Contains(t, reports[0], "goroutine ", "a report carries its stack")
}
