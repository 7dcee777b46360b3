package fcsp

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/kernels"
)

// reusedWithin collects garbage and makes tenants, rounds times, and says
// whether one of them got old, a closed tenant's core. Each round holds 64
// tenants open at once, so that they drain what the pool of cores holds.
func reusedWithin(t *testing.T, p *Pool, old *tenantCore, rounds int) bool {
	t.Helper()
	for range rounds {
		runtime.GC()
		time.Sleep(2 * time.Millisecond) // the cleanups run on their own goroutine
		var made [64]*Tenant
		found := false
		for i := range made {
			tn, err := p.NewTenant("probe" + string(rune('A'+i)))
			require.NoError(t, err)
			made[i] = tn
			found = found || tn.c == old
		}
		for _, tn := range made {
			require.NoError(t, tn.Close())
		}
		if found {
			return true
		}
	}
	return false
}

// A plain tenant's core is reused once its Close has ended and nothing
// that could still call into it is reachable; never while the handle, its
// first stream's pointer or anything made on it is. Each case holds one
// of them past the tenant's Close: the core must not be reused meanwhile,
// a call through it must answer ErrClosed, and once it is dropped the core
// must be reused (which shows the first part could have failed: without
// the ref a Module, Event, Workspace, Graph or Current holds, it was).
func TestTenantCoreReusedOnlyOnceUnreachable(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// hold makes something on tn and returns a call through it, to be
		// made after tn is closed.
		hold func(t *testing.T, tn *Tenant) func() error
	}{
		{"handle", func(t *testing.T, tn *Tenant) func() error {
			return func() error { _, err := tn.Alloc(ctx, 1); return err }
		}},
		{"first stream", func(t *testing.T, tn *Tenant) func() error {
			s := tn.Stream()
			return s.Synchronize
		}},
		{"module", func(t *testing.T, tn *Tenant) func() error {
			m, err := tn.LoadModule(kernels.ChainPTX)
			require.NoError(t, err)
			return func() error { _, err := m.Function("chain"); return err }
		}},
		{"event", func(t *testing.T, tn *Tenant) func() error {
			e, err := tn.NewEvent()
			require.NoError(t, err)
			return func() error { return e.Record(nil) }
		}},
		{"workspace", func(t *testing.T, tn *Tenant) func() error {
			w, err := tn.AllocWorkspace(ctx, nil, 1<<10)
			require.NoError(t, err)
			return w.Close // the tenant's Close freed it: its free is refused
		}},
		{"graph", func(t *testing.T, tn *Tenant) func() error {
			g, err := tn.Stream().Capture(ctx, func() error { return nil })
			require.NoError(t, err)
			return func() error { _, err := g.Instantiate(); return err }
		}},
		{"current", func(t *testing.T, tn *Tenant) func() error {
			var kept Current
			require.NoError(t, tn.Do(ctx, func(cur Current) error { kept = cur; return nil }))
			return func() error { _, err := kept.Workspace(nil, 1); return err }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := openSim(t)
			tn, err := p.NewTenant("t")
			require.NoError(t, err)
			old := tn.c
			call := tc.hold(t, tn)
			require.NoError(t, tn.Close())
			if tc.name != "handle" {
				tn = nil // only what hold made keeps the core now
			}
			require.False(t, reusedWithin(t, p, old, 6), "the core was reused while something made on the tenant could still call into it")
			require.Error(t, call(), "a call after the tenant's Close")
			runtime.KeepAlive(tn)
			call = nil
			tn = nil
			rounds := 200
			if raceEnabled {
				rounds = 20
			}
			if reused := reusedWithin(t, p, old, rounds); !raceEnabled {
				// Under the detector sync.Pool drops a quarter of what it
				// is given, the old core perhaps.
				require.True(t, reused, "the core was never reused once nothing reached it")
			}
		})
	}
}

// A tenant made with options that keep it in pool-wide lists (a limit, a
// GPU share, metering) is never reused: its engine may still look at it.
func TestLimitedTenantCoreIsNotReused(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("t", WithSMLimit(0.5))
	require.NoError(t, err)
	old := tn.c
	require.NoError(t, tn.Close())
	tn = nil
	runtime.KeepAlive(tn)
	require.False(t, reusedWithin(t, p, old, 6))
}

// Calls through everything made on tenants race the tenants' Close, the
// collector and new tenants that reuse the cores: under the race detector
// a stale call that reached a reused core is a data race with the
// NewTenant making it again; without it, a stale call that succeeded.
func TestStaleCallsRaceTenantCoreReuse(t *testing.T) {
	p, _ := openSim(t)
	ctx := context.Background()
	stop := make(chan struct{})
	collector := make(chan struct{})
	go func() { // the collector, often
		defer close(collector)
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()
	rounds := 200
	if testing.Short() {
		rounds = 50
	}
	var makers sync.WaitGroup
	for g := range 4 {
		makers.Go(func() {
			type leftover struct {
				m   *Module
				e   *Event
				s   *Stream
				cur Current
			}
			var old []leftover
			name := "t" + string(rune('a'+g))
			for round := range rounds {
				tn, err := p.NewTenant(name)
				if !assert.NoError(t, err) {
					return
				}
				m, err := tn.LoadModule(kernels.ChainPTX)
				if !assert.NoError(t, err) {
					return
				}
				e, err := tn.NewEvent()
				if !assert.NoError(t, err) {
					return
				}
				var kept Current
				assert.NoError(t, tn.Do(ctx, func(cur Current) error { kept = cur; return nil }))
				s := tn.Stream()
				// What is left of earlier tenants is their children: kept
				// over the next rounds, as the collector runs and this
				// tenant (open now) may reuse one of their cores, each
				// still answers ErrClosed.
				for _, l := range old {
					switch {
					case l.m != nil:
						_, err = l.m.Function("chain")
						assert.ErrorIs(t, err, ErrClosed)
					case l.e != nil:
						assert.ErrorIs(t, l.e.Record(nil), ErrClosed)
					case l.s != nil:
						assert.ErrorIs(t, l.s.Synchronize(), ErrClosed)
					default:
						_, err = l.cur.Workspace(nil, 1)
						assert.Error(t, err)
					}
				}
				var stale sync.WaitGroup
				stale.Go(func() { // racing the Close
					for range 20 {
						_, _ = m.Function("chain")
						_ = e.Record(nil)
						_ = s.Synchronize()
						_, _ = kept.Workspace(nil, 1)
						_ = tn.Stats()
					}
				})
				assert.NoError(t, tn.Close())
				stale.Wait()
				// One of them is kept (each holds the tenant's core on its
				// own), the others dropped.
				var l leftover
				switch round % 4 {
				case 0:
					l.m = m
				case 1:
					l.e = e
				case 2:
					l.s = s
				default:
					l.cur = kept
				}
				old = append(old, l)
				if len(old) > 16 {
					old = old[1:]
				}
			}
		})
	}
	makers.Wait()
	close(stop)
	<-collector
}
