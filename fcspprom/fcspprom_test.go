package fcspprom_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcspprom"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/kernels"
)

func TestCollectorReportsEachTenant(t *testing.T) {
	ctx := context.Background()
	// The simulator through the public option: fcspprom is outside fcsp,
	// so the fcsp tests' openSim helper is not in reach.
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	a, err := pool.NewTenant("interactive", fcsp.WithSMs(8), fcsp.WithMemoryQuota(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close() // kept alive: a tenant nothing refers to is closed when collected
	batch, err := pool.NewTenant("batch", fcsp.WithSMLimit(0.5))
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close() // kept: a tenant nothing refers to is closed when collected
	if _, err := a.Alloc(ctx, 1<<20); err != nil {
		t.Fatal(err)
	}
	c := fcspprom.NewCollector(pool)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `
# HELP fcsp_tenant_memory_used_bytes Device memory the tenant's live allocations hold: what its quota bounds. Freed blocks it keeps cached are not in it (fcsp_tenant_memory_cached_bytes).
# TYPE fcsp_tenant_memory_used_bytes gauge
fcsp_tenant_memory_used_bytes{class="batch"} 0
fcsp_tenant_memory_used_bytes{class="interactive"} 1.048576e+06
# HELP fcsp_tenant_memory_limit_bytes The tenant's memory quota (WithMemoryQuota); absent for a tenant without one, which the device's limit alone bounds (fcsp_pool_memory_limit_bytes).
# TYPE fcsp_tenant_memory_limit_bytes gauge
fcsp_tenant_memory_limit_bytes{class="interactive"} 6.7108864e+07
# HELP fcsp_tenant_sms SMs the tenant runs on (unpartitioned: those no partition holds, shared; the whole device while no partition exists).
# TYPE fcsp_tenant_sms gauge
fcsp_tenant_sms{class="batch"} 124
fcsp_tenant_sms{class="interactive"} 8
# HELP fcsp_tenant_sm_limit_ratio WithSMLimit: the tenant's launch-rate limit as a fraction of what its own SMs (fcsp_tenant_sms) can take; 0: none. A WithGPUShare tenant's limit is fcsp_tenant_gpu_share_ratio.
# TYPE fcsp_tenant_sm_limit_ratio gauge
fcsp_tenant_sm_limit_ratio{class="batch"} 0.5
fcsp_tenant_sm_limit_ratio{class="interactive"} 0
# HELP fcsp_pool_tenants Live tenants.
# TYPE fcsp_pool_tenants gauge
fcsp_pool_tenants 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"fcsp_tenant_memory_used_bytes", "fcsp_tenant_memory_limit_bytes", "fcsp_tenant_sms",
		"fcsp_tenant_sm_limit_ratio", "fcsp_pool_tenants"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "fcsp_tenant_throttle_wait_seconds_total"); n != 2 {
		t.Fatalf("throttle wait series: %d, want one per tenant", n)
	}
	// GPU time, once metered: one series per class the tenant launched on.
	m, err := pool.NewTenant("metered", fcsp.WithGPUMetering())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close() // kept alive: a tenant nothing refers to is closed when collected
	mod, err := m.LoadModule(kernels.ChainPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("spin")
	if err != nil {
		t.Fatal(err)
	}
	var args fcsp.Args
	one := fcsp.Dim3{X: 1, Y: 1, Z: 1}
	if err := m.Stream().Launch(ctx, fn, one, one, 0, args.Uint64(1)); err != nil {
		t.Fatal(err)
	}
	if err := m.Stream().Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got := len(m.Stats().GPUTimeByClass); got != 1 {
		t.Fatalf("metered tenant: %d classes with GPU time, want 1", got)
	}
	if n := testutil.CollectAndCount(c, "fcsp_tenant_gpu_seconds_total"); n != 1 {
		t.Fatalf("GPU time series: %d, want 1 (the metered tenant's default class)", n)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// Bandwidth and priority: a latency tenant's declared bytes become its
// achieved bandwidth and bytes moved; a floored neighbour shows its floor.
func TestCollectorReportsBandwidth(t *testing.T) {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	lat, err := pool.NewTenant("lat", fcsp.WithSMs(16), fcsp.WithPriority(fcsp.LatencyCritical))
	if err != nil {
		t.Fatal(err)
	}
	defer lat.Close() // kept alive: a tenant nothing refers to is closed when collected
	// Kept, and closed at the end: a tenant nothing refers to is closed
	// when collected, and then is not in the pool's Stats (a GC during the
	// test dropped its series, 1 run in 8 under -race).
	batch, err := pool.NewTenant("batch", fcsp.WithRestOfSMs(), fcsp.WithBandwidthFloor(0.25))
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Close()
	mod, err := lat.LoadModule(kernels.TriadPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("triad")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1024
	fn.SetBytesMoved(kernels.TriadBytes(n))
	var bufs [3]fcsp.DevicePtr
	for i := range bufs {
		if bufs[i], err = lat.Alloc(ctx, 4*n); err != nil {
			t.Fatal(err)
		}
	}
	var a fcsp.Args
	a.Ptr(bufs[0]).Ptr(bufs[1]).Ptr(bufs[2]).Float32(2).Uint32(n)
	for range 4 {
		if err := lat.Stream().Launch(ctx, fn, fcsp.Dim3{X: 4, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &a); err != nil {
			t.Fatal(err)
		}
	}
	if err := lat.Stream().Synchronize(); err != nil {
		t.Fatal(err)
	}
	c := fcspprom.NewCollector(pool)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `
# HELP fcsp_tenant_bytes_moved_total Declared bytes (Function.SetBytesMoved) of the tenant's completed launches.
# TYPE fcsp_tenant_bytes_moved_total counter
fcsp_tenant_bytes_moved_total{class="batch"} 0
fcsp_tenant_bytes_moved_total{class="lat"} 49152
# HELP fcsp_tenant_latency_critical 1 if the tenant is WithPriority(fcsp.LatencyCritical).
# TYPE fcsp_tenant_latency_critical gauge
fcsp_tenant_latency_critical{class="batch"} 0
fcsp_tenant_latency_critical{class="lat"} 1
# HELP fcsp_tenant_bandwidth_floor_ratio WithBandwidthFloor: the fraction of its GPU share the tenant keeps while a latency-critical tenant is busy; absent without a floor.
# TYPE fcsp_tenant_bandwidth_floor_ratio gauge
fcsp_tenant_bandwidth_floor_ratio{class="batch"} 0.25
# HELP fcsp_pool_latency_busy 1 while a latency-critical tenant has kernels in flight, as last seen.
# TYPE fcsp_pool_latency_busy gauge
fcsp_pool_latency_busy 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"fcsp_tenant_bytes_moved_total", "fcsp_tenant_latency_critical", "fcsp_tenant_bandwidth_floor_ratio", "fcsp_pool_latency_busy"); err != nil {
		t.Fatal(err)
	}
	// Measured on the simulator's wall clock: present, positive, for the
	// latency tenant only.
	if n := testutil.CollectAndCount(c, "fcsp_tenant_bandwidth_bytes_per_second"); n != 1 {
		t.Fatalf("bandwidth series: %d, want the latency tenant's", n)
	}
	if n := testutil.CollectAndCount(c, "fcsp_tenant_slowdown_ratio"); n != 1 {
		t.Fatalf("slowdown series: %d, want the latency tenant's", n)
	}
}

// NewCollector(nil) served no series, silently. Its registration now
// fails, saying why (MustRegister panics, as for any invalid collector),
// and so does a scrape of it where it got past one. NewGatherer(nil)'s
// Gather fails the same way.
func TestCollectorOfNoPool(t *testing.T) {
	c := fcspprom.NewCollector(nil)
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err == nil || !strings.Contains(err.Error(), "nil pool") {
		t.Fatalf("Register of a nil pool's collector: %v; want an error naming the nil pool", err)
	} else if !errors.Is(err, fcsp.ErrInvalidArgument) {
		t.Fatalf("Register of a nil pool's collector: %v; want fcsp.ErrInvalidArgument", err)
	}
	unchecked := prometheus.NewPedanticRegistry()
	if err := unchecked.Register(noDescribe{c}); err != nil {
		t.Fatal(err)
	}
	if _, err := unchecked.Gather(); err == nil || !strings.Contains(err.Error(), "nil pool") {
		t.Fatalf("a scrape of a nil pool's collector: %v; want an error naming the nil pool", err)
	}
	if _, err := fcspprom.NewGatherer(nil).Gather(); err == nil || !strings.Contains(err.Error(), "nil pool") {
		t.Fatalf("NewGatherer(nil).Gather: %v; want an error naming the nil pool", err)
	}
}

// noDescribe is a collector that describes nothing: an unchecked one,
// which a registry does not check at registration.
type noDescribe struct{ c prometheus.Collector }

func (noDescribe) Describe(chan<- *prometheus.Desc)      {}
func (n noDescribe) Collect(ch chan<- prometheus.Metric) { n.c.Collect(ch) }
