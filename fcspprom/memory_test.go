package fcspprom

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Issue 54: the SDK's own device memory by kind, its green contexts, and
// the device's view of the process beside what the pool counts, the
// difference among it; the device's series only once it was sampled.
func TestCollectDeviceMemory(t *testing.T) {
	ps := fcsp.PoolStats{
		Overhead: fcsp.Overhead{Bytes: 90 << 20, GreenContexts: 80 << 20, Streams: 8 << 20, Modules: 2 << 20,
			GreenMade: 20, GreenLive: 18, GreenKept: 6, GreenLimit: 64, StreamsLive: 16, ModulesLive: 1},
		DeviceMemory: fcsp.DeviceMemory{At: time.Unix(1, 0), Used: 700 << 20, Counted: 150 << 20, Unaccounted: 550 << 20, Charged: 550 << 20},
	}
	s := snapshot{bare(), ps}
	if problems, err := testutil.CollectAndLint(s); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `
# HELP fcsp_pool_overhead_bytes Device memory the SDK's own objects hold, by kind (green_contexts: 4 MiB each made, until the pool closes; streams, events, modules), counted against the device limit beside fcsp_pool_memory_used_bytes.
# TYPE fcsp_pool_overhead_bytes gauge
fcsp_pool_overhead_bytes{kind="events"} 0
fcsp_pool_overhead_bytes{kind="green_contexts"} 8.388608e+07
fcsp_pool_overhead_bytes{kind="modules"} 2.097152e+06
fcsp_pool_overhead_bytes{kind="streams"} 8.388608e+06
# HELP fcsp_pool_green_contexts Green contexts of the pool: made (each holds its memory until the pool closes), live (not destroyed), kept (by the process for reuse, any pool's of the device).
# TYPE fcsp_pool_green_contexts gauge
fcsp_pool_green_contexts{state="kept"} 6
fcsp_pool_green_contexts{state="live"} 18
fcsp_pool_green_contexts{state="made"} 20
# HELP fcsp_pool_green_context_limit WithGreenContextLimit: the most green contexts the pool makes; absent without one.
# TYPE fcsp_pool_green_context_limit gauge
fcsp_pool_green_context_limit 64
# HELP fcsp_pool_device_used_bytes The process's device memory as the device reports it (NVML), at the last sample; absent until sampled.
# TYPE fcsp_pool_device_used_bytes gauge
fcsp_pool_device_used_bytes 7.340032e+08
# HELP fcsp_pool_unaccounted_bytes Of fcsp_pool_device_used_bytes, what neither the tenants nor the SDK's objects count (the primary context, libraries' own workspaces and caching allocators), at the last sample; absent until sampled.
# TYPE fcsp_pool_unaccounted_bytes gauge
fcsp_pool_unaccounted_bytes 5.767168e+08
# HELP fcsp_pool_unaccounted_charged_bytes Of fcsp_pool_unaccounted_bytes, what counts against the device limit (WithUnaccountedHeadroom); absent until sampled.
# TYPE fcsp_pool_unaccounted_charged_bytes gauge
fcsp_pool_unaccounted_charged_bytes 5.767168e+08
`
	names := []string{"fcsp_pool_overhead_bytes", "fcsp_pool_green_contexts", "fcsp_pool_green_context_limit",
		"fcsp_pool_device_used_bytes", "fcsp_pool_unaccounted_bytes", "fcsp_pool_unaccounted_charged_bytes"}
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// Not sampled, no bound: those series are absent, not 0.
	s = snapshot{bare(), fcsp.PoolStats{}}
	for _, n := range names[2:] {
		if c := testutil.CollectAndCount(s, n); c != 0 {
			t.Errorf("%s: %d series before a sample", n, c)
		}
	}
}
