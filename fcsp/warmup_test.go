package fcsp

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// warmLog records, in one order, where warm-ups ran and where Dos ran:
// a Do's context must have been warmed (by its tenant's warm-up) before.
type warmLog struct {
	mu     sync.Mutex
	warmed map[string]map[cuda.Context]int // runs by tenant and context
	sizes  map[string]map[int]int          // warm-ups by tenant and size
	cold   []string                        // Dos that met a context not warmed for them
	dos    int
}

func newWarmLog() *warmLog {
	return &warmLog{warmed: map[string]map[cuda.Context]int{}, sizes: map[string]map[int]int{}}
}

// warmup is tenant's warm-up: it records its context and size.
func (l *warmLog) warmup(tenant string) func(Current) error {
	return func(cur Current) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.warmed[tenant] == nil {
			l.warmed[tenant], l.sizes[tenant] = map[cuda.Context]int{}, map[int]int{}
		}
		l.warmed[tenant][cur.in.Cur]++
		l.sizes[tenant][cur.SMs()]++
		return nil
	}
}

// do is a Do's f for tenant that checks its context was warmed.
func (l *warmLog) do(tenant string, hold time.Duration) func(Current) error {
	return func(cur Current) error {
		l.mu.Lock()
		l.dos++
		if l.warmed[tenant][cur.in.Cur] == 0 {
			l.cold = append(l.cold, tenant)
		}
		l.mu.Unlock()
		time.Sleep(hold)
		return nil
	}
}

func (l *warmLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.NotZero(t, l.dos)
	require.Empty(t, l.cold, "Dos that met a context before the warm-up ran there")
	for tenant, m := range l.warmed {
		for ctx, n := range m {
			require.Equal(t, 1, n, "tenant %s's warm-up ran %d times in context %#x", tenant, n, ctx)
		}
	}
}

// dosAtOnce runs n Dos of tn at once, each holding its context until all n
// hold one (so they hold n different contexts), then returns. A Do waits
// for the others at most a second: a latency class's controller may start
// a Reshape on seeing them, which waits for the Dos inside while the rest
// wait at its gate.
func dosAtOnce(t *testing.T, tn *Tenant, n int, f func(Current) error) {
	t.Helper()
	var wg sync.WaitGroup
	var in atomic.Int32
	all := make(chan struct{})
	for range n {
		wg.Go(func() {
			require.NoError(t, tn.Do(context.Background(), func(cur Current) error {
				if in.Add(1) == int32(n) {
					close(all)
				}
				select {
				case <-all:
				case <-time.After(time.Second):
				}
				return f(cur)
			}))
		})
	}
	wg.Wait()
}

// A partitioned, reshapable tenant's warm-up runs in every context of
// every size before NewTenant returns, each run told its size; no Do and
// no Reshape after makes a context, and every Do meets a warmed one.
func TestWarmupRunsInEveryContextAtNewTenant(t *testing.T) {
	p, drv := openSim(t)
	l := newWarmLog()
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(16, 24), WithConcurrentDos(3), WithWarmup(l.warmup("a")))
	require.NoError(t, err)
	require.Len(t, l.warmed["a"], 9, "3 contexts in each of 3 sizes")
	require.Equal(t, map[int]int{8: 3, 16: 3, 24: 3}, l.sizes["a"])
	made := drv.Calls("cuGreenCtxCreate")
	for _, n := range []int{16, 24, 8} {
		require.NoError(t, a.Reshape(context.Background(), n))
		dosAtOnce(t, a, 3, l.do("a", 0))
	}
	require.Equal(t, made, drv.Calls("cuGreenCtxCreate"), "a context made on a request's path")
	l.check(t)
	require.Equal(t, 9, l.sizes["a"][8]+l.sizes["a"][16]+l.sizes["a"][24], "the warm-up ran once in each")
}

// The latency class and the rest tenant it trades SMs with: every size the
// controller may move either to is warmed at NewTenant, so the Dos of a
// burst, grown onto more SMs and back, meet no cold context.
func TestWarmupFollowsTheController(t *testing.T) {
	p, drv := openSim(t)
	l := newWarmLog()
	lat, err := p.NewTenant("lat", WithLatencyTarget(300*time.Microsecond, 16, 48), WithConcurrentDos(4), WithWarmup(l.warmup("lat")))
	require.NoError(t, err)
	rest, err := p.NewTenant("rest", WithRestOfSMs(), WithConcurrentDos(2), WithWarmup(l.warmup("rest")))
	require.NoError(t, err)
	require.Equal(t, map[int]int{16: 4, 24: 4, 32: 4, 40: 4, 48: 4}, l.sizes["lat"])
	require.Equal(t, map[int]int{84: 2, 92: 2, 100: 2, 108: 2, 116: 2}, l.sizes["rest"])
	made := drv.Calls("cuGreenCtxCreate")

	stop := doLoop(4, func() {
		require.NoError(t, lat.Do(context.Background(), l.do("lat", 200*time.Microsecond)))
		require.NoError(t, rest.Do(context.Background(), l.do("rest", 0)))
	})
	require.Eventually(t, func() bool { return lat.SMs() == 48 }, 5*time.Second, time.Millisecond, "the burst grows the class")
	stop()
	require.Eventually(t, func() bool { return lat.SMs() == 16 }, 5*time.Second, time.Millisecond, "and it shrinks back")
	dosAtOnce(t, lat, 4, l.do("lat", 0))
	dosAtOnce(t, rest, 2, l.do("rest", 0))
	require.NotZero(t, lat.Stats().SMMoves)
	require.Equal(t, made, drv.Calls("cuGreenCtxCreate"), "a context made on a request's path")
	l.check(t)
}

// An unpartitioned tenant's warm-up runs in the commons' contexts at
// NewTenant, in those of the SMs the commons moves to before its Dos run
// there, and in a context it did not reach (held by another tenant's Do
// while it warmed, or made on demand past the 16 warmed) before the Do
// that takes it runs; once in each.
func TestWarmupFollowsTheCommons(t *testing.T) {
	p, _ := openSim(t)
	l := newWarmLog()
	plain, err := p.NewTenant("plain", WithWarmup(l.warmup("plain")))
	require.NoError(t, err)
	require.Equal(t, map[int]int{132: 1}, l.sizes["plain"], "the whole device: the primary context, once")
	other, err := p.NewTenant("other") // shares the commons, no warm-up
	require.NoError(t, err)
	dosAtOnce(t, plain, 4, l.do("plain", 0))

	part, err := p.NewTenant("part", WithSMs(16), WithReshapeSizes(32))
	require.NoError(t, err)
	require.Equal(t, 16, l.sizes["plain"][116], "the commons moved onto 116 SMs: its contexts warmed before a Do")
	dosAtOnce(t, plain, 4, l.do("plain", 0))

	// A tenant made while the other's Dos hold some of the commons'
	// contexts: they are warmed for it by its Dos that take them.
	var wg sync.WaitGroup
	in, hold := make(chan struct{}, 3), make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold) }) }) // a failure below must not leave them held
	for range 3 {
		wg.Go(func() {
			require.NoError(t, other.Do(context.Background(), func(Current) error { in <- struct{}{}; <-hold; return nil }))
		})
	}
	for range 3 {
		<-in
	}
	late, err := p.NewTenant("late", WithWarmup(l.warmup("late")))
	require.NoError(t, err)
	require.Equal(t, 16, l.sizes["late"][116], "16 warmed for it: 13 of the plain tenant's and 3 made")
	release.Do(func() { close(hold) })
	wg.Wait()
	dosAtOnce(t, late, 20, l.do("late", 0)) // 3 held at its NewTenant, 1 made on demand
	require.Equal(t, 20, l.sizes["late"][116])

	require.NoError(t, part.Reshape(context.Background(), 32)) // the commons moves onto 100 SMs
	require.Equal(t, 100, plain.SMs())
	require.Equal(t, 16, l.sizes["plain"][100])
	require.Equal(t, 16, l.sizes["late"][100])
	dosAtOnce(t, plain, 20, l.do("plain", 0))
	dosAtOnce(t, late, 4, l.do("late", 0))
	require.NoError(t, part.Reshape(context.Background(), 16)) // back onto 116: warmed where it was not
	require.Equal(t, 20, l.sizes["plain"][116], "the 4 contexts made since, warmed at the move")
	dosAtOnce(t, plain, 20, l.do("plain", 0))
	dosAtOnce(t, late, 20, l.do("late", 0))
	require.NoError(t, part.Close()) // the whole device again
	dosAtOnce(t, plain, 4, l.do("plain", 0))
	l.check(t)
}

// A warm-up that fails, or panics, fails NewTenant with ErrWarmupFailed
// (and its own error) and leaves nothing behind: no memory, no SMs, no
// tenant, no controller; the name can be taken again.
func TestWarmupFailureLeavesNothing(t *testing.T) {
	p, _ := openSim(t)
	boom := errors.New("boom")
	failing := func(after int) func(Current) error {
		var mu sync.Mutex
		n := 0
		return func(cur Current) error {
			if _, err := cur.Workspace(nil, 1<<20); err != nil { // memory, left for Close to free
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if n++; n > after {
				return boom
			}
			return nil
		}
	}
	free := p.Stats().FreeSMs
	for _, c := range []struct {
		name string
		opts []TenantOption
	}{
		{"partition", []TenantOption{WithSMs(16), WithConcurrentDos(4), WithWarmup(failing(2))}},
		{"reshapable", []TenantOption{WithSMs(16), WithReshapeSizes(32), WithConcurrentDos(2), WithWarmup(failing(3))}},
		{"plain", []TenantOption{WithWarmup(failing(0))}},
		{"panics", []TenantOption{WithSMs(8), WithWarmup(func(Current) error { panic("warm-up bug") })}},
	} {
		tn, err := p.NewTenant(c.name, c.opts...)
		require.ErrorIs(t, err, ErrWarmupFailed, c.name)
		require.Nil(t, tn)
		if c.name != "panics" {
			require.ErrorIs(t, err, boom, c.name)
		} else {
			require.ErrorContains(t, err, "warm-up bug")
		}
		require.Empty(t, p.Tenants(), c.name)
		require.Zero(t, p.MemoryUsed(), c.name)
		require.Equal(t, free, p.Stats().FreeSMs, c.name)
		again, err := p.NewTenant(c.name)
		require.NoError(t, err, "the name is free again")
		require.NoError(t, again.Close())
	}
	// A rest tenant that fails its warm-up leaves the latency class
	// without a controller, and the next rest tenant wires one.
	lat, err := p.NewTenant("lat", WithLatencyTarget(300*time.Microsecond, 16, 32))
	require.NoError(t, err)
	_, err = p.NewTenant("rest", WithRestOfSMs(), WithWarmup(failing(1)))
	require.ErrorIs(t, err, ErrWarmupFailed)
	require.False(t, p.moves.Steering())
	require.Equal(t, 132-16, p.Stats().FreeSMs)
	rest, err := p.NewTenant("rest", WithRestOfSMs())
	require.NoError(t, err)
	require.Equal(t, []int{100, 108, 116}, rest.Stats().ReshapeSizes)
	require.NoError(t, errors.Join(rest.Close(), lat.Close()))
	require.Zero(t, p.MemoryUsed())
}

// A warm-up that fails in the commons' contexts after a move is logged,
// and the tenant's next Do in such a context runs it again and returns
// its error; once it succeeds, the Do runs.
func TestWarmupFailingAfterAMoveIsRetriedByTheDo(t *testing.T) {
	var buf bytes.Buffer
	p, _ := openSim(t, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	var mu sync.Mutex
	fail := true
	plain, err := p.NewTenant("plain", WithWarmup(func(cur Current) error {
		mu.Lock()
		defer mu.Unlock()
		if fail && cur.SMs() < 132 {
			return errors.New("no kernels for a green context")
		}
		return nil
	}))
	require.NoError(t, err)
	part, err := p.NewTenant("part", WithSMs(16))
	require.NoError(t, err)
	defer runtime.KeepAlive(part) // collected, it would move the commons back
	require.Contains(t, buf.String(), "warm-up failed after the unpartitioned tenants moved")
	ran := false
	err = plain.Do(context.Background(), func(Current) error { ran = true; return nil })
	require.ErrorIs(t, err, ErrWarmupFailed)
	require.ErrorContains(t, err, "no kernels for a green context")
	require.False(t, ran, "the Do's f does not run in an unwarmed context")
	mu.Lock()
	fail = false
	mu.Unlock()
	require.NoError(t, plain.Do(context.Background(), func(Current) error { ran = true; return nil }))
	require.True(t, ran)
}

// A tenant whose context was done as it was made comes back (to be closed
// by the context's end, as without a warm-up), whether its close came
// before its warm-up or after.
func TestWarmupOfATenantClosedAsItWasMade(t *testing.T) {
	p, _ := openSim(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, opts := range [][]TenantOption{nil, {WithWarmup(func(Current) error { return nil })}} {
		for range 20 {
			tn, err := p.NewTenant("t", append(opts, WithSMs(16), WithContext(ctx))...)
			require.NoError(t, err)
			require.Eventually(t, func() bool { return tn.Stats().Closed && len(p.Tenants()) == 0 }, 5*time.Second, time.Millisecond)
		}
	}
}

func TestWarmupNilIsInvalid(t *testing.T) {
	p, _ := openSim(t)
	_, err := p.NewTenant("t", WithWarmup(nil))
	require.ErrorIs(t, err, ErrInvalidArgument)
}
