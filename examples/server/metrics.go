package main

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fcsp-go/fcsp-go/fcsp"
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

func newMetrics(pool *fcsp.Pool, tenants func() []*fcsp.Tenant) *metrics {
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
		&tenantCollector{pool: pool, tenants: tenants},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(class string, status int, d time.Duration) {
	m.requests.WithLabelValues(class, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(class).Observe(d.Seconds())
}

// tenantCollector reads Tenant.Stats at scrape time, so the gauges are never
// stale and the request path pays nothing for them.
type tenantCollector struct {
	pool    *fcsp.Pool
	tenants func() []*fcsp.Tenant
}

var (
	tenantLabels = []string{"tenant"}
	descMemUsed  = prometheus.NewDesc("fcsp_tenant_memory_used_bytes", "Device memory the tenant holds.", tenantLabels, nil)
	descMemLimit = prometheus.NewDesc("fcsp_tenant_memory_limit_bytes", "The tenant's memory quota.", tenantLabels, nil)
	descSMs      = prometheus.NewDesc("fcsp_tenant_sms", "SMs the tenant runs on (the whole device when not partitioned).", tenantLabels, nil)
	descPart     = prometheus.NewDesc("fcsp_tenant_partitioned", "1 if the tenant has SMs of its own.", tenantLabels, nil)
	descSMLimit  = prometheus.NewDesc("fcsp_tenant_sm_limit_ratio", "The tenant's launch-rate limit (0: none).", tenantLabels, nil)
	descLaunches = prometheus.NewDesc("fcsp_tenant_launches_admitted_total", "Kernel launches admitted.", tenantLabels, nil)
	descThrottle = prometheus.NewDesc("fcsp_tenant_launches_throttled_total", "Launches that had to wait for tokens.", tenantLabels, nil)
	descWait     = prometheus.NewDesc("fcsp_tenant_throttle_wait_seconds_total", "Seconds launches spent waiting for tokens.", tenantLabels, nil)
	descPoolUsed = prometheus.NewDesc("fcsp_pool_memory_used_bytes", "Device memory all tenants hold.", nil, nil)
	descPoolLim  = prometheus.NewDesc("fcsp_pool_memory_limit_bytes", "The pool's memory cap.", nil, nil)
	descPoolFree = prometheus.NewDesc("fcsp_pool_free_sms", "SMs not yet given to a partition.", nil, nil)
	// entries added for fault
	descPoolLost   = prometheus.NewDesc("fcsp_pool_device_lost", "1 while a sticky device error has every tenant failing (until Pool.Reset).", nil, nil)
	descPoolResets = prometheus.NewDesc("fcsp_pool_resets_total", "Successful Pool.Reset calls.", nil, nil)
)

func (c *tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMemUsed, descMemLimit, descSMs, descPart, descSMLimit,
		descLaunches, descThrottle, descWait, descPoolUsed, descPoolLim, descPoolFree, descPoolLost, descPoolResets} {
		ch <- d
	}
}

func (c *tenantCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	for _, t := range c.tenants() {
		s := t.Stats()
		gauge(descMemUsed, float64(s.MemoryUsed), s.Name)
		gauge(descMemLimit, float64(s.MemoryLimit), s.Name)
		gauge(descSMs, float64(s.SMs), s.Name)
		gauge(descPart, b2f(s.Partitioned), s.Name)
		gauge(descSMLimit, s.SMLimit, s.Name)
		counter(descLaunches, float64(s.Launches), s.Name)
		counter(descThrottle, float64(s.Throttled), s.Name)
		counter(descWait, s.ThrottleWaitS, s.Name)
	}
	gauge(descPoolUsed, float64(c.pool.MemoryUsed()))
	gauge(descPoolLim, float64(c.pool.MemoryLimit()))
	gauge(descPoolFree, float64(c.pool.FreeSMs()))
	h := c.pool.Health()
	gauge(descPoolLost, b2f(!h.Healthy()))
	counter(descPoolResets, float64(h.Resets))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
