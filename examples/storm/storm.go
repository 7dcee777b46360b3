package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcspprom"
	"github.com/prometheus/client_golang/prometheus"
)

// stormKinds are the calls a server makes between requests, each raced
// against the requests by goroutines of its own.
var stormKinds = []string{"alloc", "allocpool", "stream", "meminfo", "stats", "scrape", "tenant"}

const (
	stormNone = "none"
	stormAll  = "all"
	// stormBytes is what alloc and allocpool take and give back per call.
	stormBytes = 1 << 20
	// stormQuota is the third tenant's quota (tenant).
	stormQuota = 64 << 20
)

// kindsOf is the calls a -storm entry makes: none, one kind, or all.
func kindsOf(storm string) []string {
	switch storm {
	case stormNone:
		return nil
	case stormAll:
		return stormKinds
	}
	return []string{storm}
}

// stormEnv is what the racing calls need beyond their class's tenant.
type stormEnv struct {
	pool    *fcsp.Pool
	metrics prometheus.Gatherer // scrape: what a server's /metrics serves of the pool
	tenants atomic.Int64        // tenant: names the third tenants
}

func newStormEnv(pool *fcsp.Pool) *stormEnv {
	// The Gatherer, as a server would serve it: the pool's families at most
	// fcspprom.DefaultMaxAge old, so that a scrape costs a clock read
	// (a registry's Gather of the Collector costs about 90 µs of CPU).
	return &stormEnv{pool: pool, metrics: fcspprom.NewGatherer(pool)}
}

// stormer is one racing goroutine: one kind of call on one class's tenant,
// paced at one call per pace.
type stormer struct {
	kind  string
	t     *fcsp.Tenant
	env   *stormEnv
	calls *atomic.Int64
	s     *fcsp.Stream // allocpool's own stream
	ps    fcsp.PoolStats
	// tenant's: a name of its own (it has one tenant open at a time) and
	// its option, made once, as a server names a class and keeps its
	// options rather than formatting them per request: what the storm
	// measures is the SDK's garbage, not its own.
	name  string
	quota fcsp.TenantOption
}

// call makes one storm call (a pair where the call is a make and a free).
func (st *stormer) call(ctx context.Context) error {
	switch st.kind {
	case "alloc":
		p, err := st.t.Alloc(ctx, stormBytes)
		if err != nil {
			return err
		}
		return st.t.Free(p)
	case "allocpool":
		p, err := st.t.AllocAsync(st.s, stormBytes)
		if err != nil {
			return err
		}
		return st.t.FreeAsync(st.s, p)
	case "stream":
		s, err := st.t.NewStream(fcsp.ClassDefault)
		if err != nil {
			return err
		}
		return s.Close()
	case "meminfo":
		_, _, err := st.t.MemGetInfo()
		return err
	case "stats":
		_ = st.t.Stats()
		st.env.pool.ReadStats(&st.ps) // a poller keeps its PoolStats: no garbage
		return nil
	case "scrape":
		_, err := st.env.metrics.Gather()
		return err
	case "tenant":
		if st.name == "" {
			st.name, st.quota = fmt.Sprintf("storm-%d", st.env.tenants.Add(1)), fcsp.WithMemoryQuota(stormQuota)
		}
		t, err := st.env.pool.NewTenant(st.name, st.quota)
		if err != nil {
			return err
		}
		return t.Close()
	}
	return fmt.Errorf("unknown storm kind %q", st.kind)
}

// run calls until stop, one call every pace on average: sleep-until
// pacing that catches up on the calls a late wake-up owes (Go sleeps
// shorter than a millisecond often last one when the process is idle, and
// a server's calls do not wait for the previous one's period either), but
// at most catchUp periods of them: a goroutine further behind (its calls
// slower than pace) starts counting again from now.
func (st *stormer) run(ctx context.Context, pace time.Duration, stop <-chan struct{}) error {
	if st.kind == "allocpool" {
		s, err := st.t.NewStream(fcsp.ClassDefault)
		if err != nil {
			return err
		}
		st.s = s
		defer func() { _ = s.Close() }()
	}
	next := time.Now()
	for {
		select {
		case <-stop:
			if st.s != nil {
				return st.s.Synchronize()
			}
			return nil
		default:
		}
		if err := st.call(ctx); err != nil {
			return fmt.Errorf("storm %s on %s: %w", st.kind, st.t.Name(), err)
		}
		st.calls.Add(1)
		next = next.Add(pace)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		} else if d < -catchUp*pace {
			next = time.Now()
		}
	}
}

// catchUp is how many periods of calls a storm goroutine makes back to
// back after a late wake-up.
const catchUp = 16

// storm is the racing goroutines of one cell.
type storm struct {
	calls map[string]*atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
}

// startStorm starts g goroutines per kind per tenant.
func startStorm(ctx context.Context, env *stormEnv, tenants []*fcsp.Tenant, kinds []string, g int, pace time.Duration, stop <-chan struct{}) *storm {
	s := &storm{calls: map[string]*atomic.Int64{}}
	for _, k := range kinds {
		s.calls[k] = new(atomic.Int64)
	}
	for _, t := range tenants {
		for _, k := range kinds {
			for range g {
				st := &stormer{kind: k, t: t, env: env, calls: s.calls[k]}
				s.wg.Go(func() {
					if err := st.run(ctx, pace, stop); err != nil {
						s.mu.Lock()
						s.err = errors.Join(s.err, err)
						s.mu.Unlock()
					}
				})
			}
		}
	}
	return s
}

func (s *storm) snapshot() map[string]int64 {
	m := map[string]int64{}
	for k, c := range s.calls {
		m[k] = c.Load()
	}
	return m
}

func (s *storm) wait() error {
	s.wg.Wait()
	return s.err
}
