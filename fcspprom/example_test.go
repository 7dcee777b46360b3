package fcspprom_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcspprom"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// A server's /metrics with the pool's families served from what was
// gathered at most a second ago, beside the process's own metrics: however
// often it is scraped, the pool is read at most once a second.
func ExampleNewGatherer() {
	pool, err := fcsp.Open(context.Background(), 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := pool.NewTenant("interactive", fcsp.WithSMs(16)); err != nil {
		panic(err)
	}
	g := fcspprom.NewGatherer(pool, fcspprom.WithMaxAge(time.Second))
	http.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{prometheus.DefaultGatherer, g}, promhttp.HandlerOpts{}))

	mfs, err := g.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fcsp_tenant_sms" {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output:
	// fcsp_tenant_sms 16
}
