package fcspprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// memDescs are the series of the pool's device memory beyond its
// tenants' (issue 54): the SDK's own objects (PoolStats.Overhead) and the
// device's view of the process (PoolStats.DeviceMemory). Their labels
// "kind" and "state" are not for WithConstLabels.
type memDescs struct {
	overhead, greens, greenLimit, deviceUsed, unaccounted, charged *prometheus.Desc
}

func (d *memDescs) init(mk func(name, help string, labels ...string) *prometheus.Desc) {
	d.overhead = mk("fcsp_pool_overhead_bytes", "Device memory the SDK's own objects hold, by kind (green_contexts: 4 MiB each made, until the pool closes; streams, events, modules), counted against the device limit beside fcsp_pool_memory_used_bytes.", "kind")
	d.greens = mk("fcsp_pool_green_contexts", "Green contexts of the pool: made (each holds its memory until the pool closes), live (not destroyed), kept (by the process for reuse, any pool's of the device).", "state")
	d.greenLimit = mk("fcsp_pool_green_context_limit", "WithGreenContextLimit: the most green contexts the pool makes; absent without one.")
	d.deviceUsed = mk("fcsp_pool_device_used_bytes", "The process's device memory as the device reports it (NVML), at the last sample; absent until sampled.")
	d.unaccounted = mk("fcsp_pool_unaccounted_bytes", "Of fcsp_pool_device_used_bytes, what neither the tenants nor the SDK's objects count (the primary context, libraries' own workspaces and caching allocators), at the last sample; absent until sampled.")
	d.charged = mk("fcsp_pool_unaccounted_charged_bytes", "Of fcsp_pool_unaccounted_bytes, what counts against the device limit (WithUnaccountedHeadroom); absent until sampled.")
}

func (d *memDescs) collect(gauge func(*prometheus.Desc, float64, ...string), ps fcsp.PoolStats) {
	o := ps.Overhead
	gauge(d.overhead, float64(o.GreenContexts), "green_contexts")
	gauge(d.overhead, float64(o.Streams), "streams")
	gauge(d.overhead, float64(o.Events), "events")
	gauge(d.overhead, float64(o.Modules), "modules")
	gauge(d.greens, float64(o.GreenMade), "made")
	gauge(d.greens, float64(o.GreenLive), "live")
	gauge(d.greens, float64(o.GreenKept), "kept")
	if o.GreenLimit > 0 {
		gauge(d.greenLimit, float64(o.GreenLimit))
	}
	if dm := ps.DeviceMemory; !dm.At.IsZero() {
		gauge(d.deviceUsed, float64(dm.Used))
		gauge(d.unaccounted, float64(dm.Unaccounted))
		gauge(d.charged, float64(dm.Charged))
	}
}
