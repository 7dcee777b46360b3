// Package fcspprom exports a pool's figures to Prometheus: a
// prometheus.Collector that reads fcsp.Pool.Stats at scrape time, so the
// values are never stale and launches and allocations pay nothing for them.
// It lives apart from fcsp so that the core does not import Prometheus.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(fcspprom.NewCollector(pool))
package fcspprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Collector collects one pool's metrics.
type Collector struct {
	pool *fcsp.Pool
}

// NewCollector returns a collector of pool's figures. Register it once per
// pool; two pools in one registry need distinct registries or a
// prometheus.WrapRegistererWith label.
func NewCollector(pool *fcsp.Pool) *Collector { return &Collector{pool: pool} }

var (
	tenant = []string{"tenant"}

	descSMs      = prometheus.NewDesc("fcsp_tenant_sms", "SMs the tenant runs on (the whole device when not partitioned).", tenant, nil)
	descPart     = prometheus.NewDesc("fcsp_tenant_partitioned", "1 if the tenant has SMs of its own (a green context).", tenant, nil)
	descMemUsed  = prometheus.NewDesc("fcsp_tenant_memory_used_bytes", "Device memory the tenant holds.", tenant, nil)
	descMemLimit = prometheus.NewDesc("fcsp_tenant_memory_limit_bytes", "The tenant's memory quota.", tenant, nil)
	descMemCache = prometheus.NewDesc("fcsp_tenant_memory_cached_bytes", "Freed pool blocks kept on the tenant's free lists (WithMemoryPool).", tenant, nil)
	descSMLimit  = prometheus.NewDesc("fcsp_tenant_sm_limit_ratio", "The tenant's launch-rate limit as a fraction of the device (0: none).", tenant, nil)
	descLaunches = prometheus.NewDesc("fcsp_tenant_launches_admitted_total", "Kernel launches admitted.", tenant, nil)
	descThrottle = prometheus.NewDesc("fcsp_tenant_launches_throttled_total", "Launches that had to wait for launch tokens.", tenant, nil)
	descWait     = prometheus.NewDesc("fcsp_tenant_throttle_wait_seconds_total", "Time launches spent waiting for launch tokens.", tenant, nil)
	descGPU      = prometheus.NewDesc("fcsp_tenant_gpu_seconds_total", "Kernel time on the GPU clock of the tenant's completed launches, by stream class (WithGPUMetering or WithGPUShare; absent otherwise).", []string{"tenant", "class"}, nil)
	descStreams  = prometheus.NewDesc("fcsp_tenant_streams", "Open streams of the tenant.", tenant, nil)
	descPoolUsed = prometheus.NewDesc("fcsp_pool_memory_used_bytes", "Device memory all tenants hold.", nil, nil)
	descPoolLim  = prometheus.NewDesc("fcsp_pool_memory_limit_bytes", "The device's memory limit (its memory, WithDeviceMemoryLimit or CUDA_DEVICE_MEMORY_LIMIT).", nil, nil)
	descPoolFree = prometheus.NewDesc("fcsp_pool_free_sms", "SMs not yet given to a partition.", nil, nil)
	descTenants  = prometheus.NewDesc("fcsp_pool_tenants", "Live tenants.", nil, nil)
	descLost     = prometheus.NewDesc("fcsp_pool_device_lost", "1 while a sticky device error has every tenant failing (until the process restarts).", nil, nil)

	all = []*prometheus.Desc{descSMs, descPart, descMemUsed, descMemLimit, descMemCache, descSMLimit,
		descLaunches, descThrottle, descWait, descGPU, descStreams, descPoolUsed, descPoolLim, descPoolFree, descTenants, descLost,
		descBandwidth, descSlowdown, descBytes, descLatency, descFloor, descFloored, descBusy}
)

// Memory bandwidth and priority (fcsp.Stats.Bandwidth).
var (
	descBandwidth = prometheus.NewDesc("fcsp_tenant_bandwidth_bytes_per_second", "Achieved memory bandwidth of the tenant's recent launches with declared bytes (Function.SetBytesMoved), on the GPU clock; absent until measured.", tenant, nil)
	descSlowdown  = prometheus.NewDesc("fcsp_tenant_slowdown_ratio", "Recent kernel durations over the best each kernel shape has run, weighted by GPU time (1: as fast as ever seen); absent until measured.", tenant, nil)
	descBytes     = prometheus.NewDesc("fcsp_tenant_bytes_moved_total", "Declared bytes (Function.SetBytesMoved) of the tenant's completed launches.", tenant, nil)
	descLatency   = prometheus.NewDesc("fcsp_tenant_latency_critical", "1 if the tenant is WithPriority(fcsp.LatencyCritical).", tenant, nil)
	descFloor     = prometheus.NewDesc("fcsp_tenant_bandwidth_floor_ratio", "WithBandwidthFloor: the fraction of its GPU share the tenant keeps while a latency-critical tenant is busy; absent without a floor.", tenant, nil)
	descFloored   = prometheus.NewDesc("fcsp_tenant_floored_launches_total", "Launches admitted at the floor (a latency-critical tenant was busy); absent without a floor.", tenant, nil)
	descBusy      = prometheus.NewDesc("fcsp_pool_latency_busy", "1 while a latency-critical tenant has kernels in flight, as last seen.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range all {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	ps := c.pool.Stats()
	for _, s := range ps.Tenants {
		gauge(descSMs, float64(s.SMs), s.Name)
		gauge(descPart, b2f(s.Partitioned), s.Name)
		gauge(descMemUsed, float64(s.MemoryUsed), s.Name)
		gauge(descMemLimit, float64(s.MemoryLimit), s.Name)
		gauge(descMemCache, float64(s.MemoryCached), s.Name)
		gauge(descSMLimit, s.SMLimit, s.Name)
		counter(descLaunches, float64(s.Launches), s.Name)
		counter(descThrottle, float64(s.Throttled), s.Name)
		counter(descWait, s.ThrottleWait.Seconds(), s.Name)
		gauge(descStreams, float64(s.Streams), s.Name)
		for class, d := range s.GPUTimeByClass {
			counter(descGPU, d.Seconds(), s.Name, class.String())
		}
		bw := s.Bandwidth
		if bw.BytesPerSecond > 0 {
			gauge(descBandwidth, bw.BytesPerSecond, s.Name)
		}
		if bw.Slowdown > 0 {
			gauge(descSlowdown, bw.Slowdown, s.Name)
		}
		counter(descBytes, float64(bw.BytesMoved), s.Name)
		gauge(descLatency, b2f(bw.Priority == fcsp.LatencyCritical), s.Name)
		if bw.Floor > 0 {
			gauge(descFloor, bw.Floor, s.Name)
			counter(descFloored, float64(bw.FlooredLaunches), s.Name)
		}
	}
	gauge(descPoolUsed, float64(ps.MemoryUsed))
	gauge(descPoolLim, float64(ps.MemoryLimit))
	gauge(descPoolFree, float64(c.pool.FreeSMs()))
	gauge(descTenants, float64(len(ps.Tenants)))
	gauge(descLost, b2f(!ps.Health.Healthy()))
	gauge(descBusy, b2f(c.pool.LatencyBusy()))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
