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

// classCollector serves, per request class (label class), what the Gateway
// API Inference Extension's model-server protocol asks of a model server,
// so that an inference gateway's endpoint picker can route each class
// across replicas by its own load (docs/DEPLOY.md has the flags):
//
//   - fcsp_server_requests_waiting: requests waiting for one of the class's
//     streams (the protocol's TotalQueuedRequests; vLLM's
//     num_requests_waiting);
//   - fcsp_server_requests_running: requests holding a stream, on the GPU
//     or waiting for the class's launch tokens (TotalRunningRequests;
//     num_requests_running);
//   - fcsp_server_memory_usage_ratio: the class's live device memory over
//     its quota, 0 to 1 (where the protocol has KVCacheUtilization: a
//     server without a KV cache reports the memory its requests hold).
//
// All three are gauges read at each scrape.
type classCollector []*class

var (
	waitingDesc = prometheus.NewDesc("fcsp_server_requests_waiting",
		"Requests of the class waiting for one of its streams (the Gateway API Inference Extension's TotalQueuedRequests).", []string{"class"}, nil)
	runningDesc = prometheus.NewDesc("fcsp_server_requests_running",
		"Requests of the class holding a stream: on the GPU or waiting for the class's launch tokens (TotalRunningRequests).", []string{"class"}, nil)
	memoryDesc = prometheus.NewDesc("fcsp_server_memory_usage_ratio",
		"The class's live device memory over its quota, 0 to 1 (in place of the protocol's KVCacheUtilization).", []string{"class"}, nil)
)

func (cc classCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- waitingDesc
	ch <- runningDesc
	ch <- memoryDesc
}

func (cc classCollector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cc {
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(c.waiting.Load()), c.name)
		ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(c.running.Load()), c.name)
		if st := c.tenant.Stats(); st.MemoryLimit > 0 {
			ch <- prometheus.MustNewConstMetric(memoryDesc, prometheus.GaugeValue, float64(st.MemoryUsed)/float64(st.MemoryLimit), c.name)
		}
	}
}
