package main

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcspprom"
)

// metrics is the server's private registry (not the global one, so tests
// and several servers in one process do not collide) and what it holds.
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	launchWait *prometheus.HistogramVec
}

// latencyBuckets span an interactive kernel on a GPU (tens of µs) to a
// throttled batch kernel (seconds).
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 20)

func newMetrics(pool *fcsp.Pool) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fcsp_server_requests_total", Help: "Requests by class and HTTP status.",
		}, []string{"class", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fcsp_server_request_duration_seconds", Help: "Request latency by class, as the server saw it.",
			Buckets: latencyBuckets,
		}, []string{"class"}),
		launchWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fcsp_server_launch_wait_seconds",
			Help: "Time a request spent in Stream.Launch: the tenant's rate-limit (throttle) wait plus the launch call " +
				"(on the fake driver also the kernel, which runs inside the launch).",
			Buckets: latencyBuckets,
		}, []string{"class"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.launchWait,
		fcspprom.NewCollector(pool),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(class string, status int, d time.Duration) {
	m.requests.WithLabelValues(class, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(class).Observe(d.Seconds())
}
