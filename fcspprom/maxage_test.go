package fcspprom_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcspprom"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// tenantsGauge is fcsp_pool_tenants in families.
func tenantsGauge(t *testing.T, mfs []*dto.MetricFamily) float64 {
	t.Helper()
	for _, mf := range mfs {
		if mf.GetName() == "fcsp_pool_tenants" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no fcsp_pool_tenants")
	return 0
}

// A Gatherer keeps its families for its max age: a tenant made meanwhile
// shows only after. With WithMaxAge(0) every scrape reads the pool.
func TestGathererKeepsFiguresForItsMaxAge(t *testing.T) {
	p := openPool(t)
	kept := fcspprom.NewGatherer(p, fcspprom.WithMaxAge(time.Hour))
	fresh := fcspprom.NewGatherer(p, fcspprom.WithMaxAge(0))
	short := fcspprom.NewGatherer(p, fcspprom.WithMaxAge(20*time.Millisecond))
	for _, g := range []prometheus.Gatherer{kept, fresh, short} {
		mfs, err := g.Gather()
		require.NoError(t, err)
		require.Equal(t, 0.0, tenantsGauge(t, mfs))
	}
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	defer a.Close()
	mfs, err := kept.Gather()
	require.NoError(t, err)
	require.Equal(t, 0.0, tenantsGauge(t, mfs), "within the max age: the figures gathered before")
	mfs, err = fresh.Gather()
	require.NoError(t, err)
	require.Equal(t, 1.0, tenantsGauge(t, mfs), "max age 0: the pool as it is")
	require.Eventually(t, func() bool {
		mfs, err := short.Gather()
		return err == nil && tenantsGauge(t, mfs) == 1
	}, 5*time.Second, 5*time.Millisecond, "past the max age: gathered again")
}

// The Collector reads the pool at every scrape unless WithMaxAge says
// otherwise.
func TestCollectorMaxAge(t *testing.T) {
	p := openPool(t)
	fresh := fcspprom.NewCollector(p)
	kept := fcspprom.NewCollector(p, fcspprom.WithMaxAge(time.Hour))
	require.Equal(t, 0.0, testutil.ToFloat64(onlyTenants{fresh}))
	require.Equal(t, 0.0, testutil.ToFloat64(onlyTenants{kept}))
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	defer a.Close()
	require.Equal(t, 1.0, testutil.ToFloat64(onlyTenants{fresh}))
	require.Equal(t, 0.0, testutil.ToFloat64(onlyTenants{kept}))
}

// onlyTenants passes on fcsp_pool_tenants alone, for testutil.ToFloat64.
type onlyTenants struct{ c *fcspprom.Collector }

func (o onlyTenants) Describe(ch chan<- *prometheus.Desc) { o.c.Describe(ch) }
func (o onlyTenants) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 256)
	go func() { o.c.Collect(all); close(all) }()
	for m := range all {
		if d := m.Desc().String(); len(d) > 0 && strings.Contains(d, `"fcsp_pool_tenants"`) {
			ch <- m
		}
	}
}

// Scrapes racing each other, tenants made and closed, and the pool's
// Close: no race, no error but what a closed pool says, every scrape
// consistent (the race detector and the registry's checks see to it).
func TestGathererRacingScrapesAndClose(t *testing.T) {
	p, err := fcsp.Open(context.Background(), 0, fcsptest.SimulatedH200())
	require.NoError(t, err)
	g := fcspprom.NewGatherer(p, fcspprom.WithMaxAge(time.Millisecond))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mfs, err := g.Gather()
				if err != nil {
					t.Error(err)
					return
				}
				if len(mfs) == 0 {
					t.Error("no families")
					return
				}
			}
		})
	}
	for range 50 {
		a, err := p.NewTenant("churn")
		require.NoError(t, err)
		require.NoError(t, a.Close())
	}
	require.NoError(t, p.Close())
	time.Sleep(5 * time.Millisecond)
	close(stop)
	wg.Wait()
}
