package fcspprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcspprom"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/kernels"
)

func openPool(t *testing.T) *fcsp.Pool {
	t.Helper()
	pool, err := fcsp.Open(context.Background(), 0, fcsptest.SimulatedH200())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	return pool
}

func newTenant(t *testing.T, pool *fcsp.Pool, name string, opts ...fcsp.TenantOption) *fcsp.Tenant {
	t.Helper()
	tn, err := pool.NewTenant(name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	// Closed by the test: a tenant nothing refers to is closed when
	// collected, and leaves the pool's Stats.
	t.Cleanup(func() { _ = tn.Close() })
	return tn
}

// A WithGPUShare tenant shows its share; before, it read as unlimited
// (fcsp_tenant_sm_limit_ratio 0, no share anywhere).
func TestCollectorReportsGPUShare(t *testing.T) {
	pool := openPool(t)
	newTenant(t, pool, "share", fcsp.WithGPUShare(0.3))
	newTenant(t, pool, "rate", fcsp.WithSMLimit(0.5))
	newTenant(t, pool, "free")
	c := fcspprom.NewCollector(pool)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `
# HELP fcsp_tenant_gpu_share_ratio WithGPUShare: the fraction of the device's time the tenant's kernels and Do calls may use; 0: none.
# TYPE fcsp_tenant_gpu_share_ratio gauge
fcsp_tenant_gpu_share_ratio{class="free"} 0
fcsp_tenant_gpu_share_ratio{class="rate"} 0
fcsp_tenant_gpu_share_ratio{class="share"} 0.3
# HELP fcsp_tenant_sm_limit_ratio WithSMLimit: the tenant's launch-rate limit as a fraction of what its own SMs (fcsp_tenant_sms) can take; 0: none. A WithGPUShare tenant's limit is fcsp_tenant_gpu_share_ratio.
# TYPE fcsp_tenant_sm_limit_ratio gauge
fcsp_tenant_sm_limit_ratio{class="free"} 0
fcsp_tenant_sm_limit_ratio{class="rate"} 0.5
fcsp_tenant_sm_limit_ratio{class="share"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "fcsp_tenant_gpu_share_ratio", "fcsp_tenant_sm_limit_ratio"); err != nil {
		t.Fatal(err)
	}
}

// The pool's used bytes are device memory: the chunks the tenants' pools
// map, which hold their allocations and the freed blocks cached on their
// free lists; the tenants' used bytes count what they allocated, and the
// cached bytes are a metric of their own.
func TestCollectorReportsCachedBytes(t *testing.T) {
	ctx := context.Background()
	pool := openPool(t)
	pooled := newTenant(t, pool, "pooled", fcsp.WithMemoryPool(64<<20))
	plain := newTenant(t, pool, "plain")
	for range 2 {
		p, err := pooled.Alloc(ctx, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := pooled.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pooled.Alloc(ctx, 4<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Alloc(ctx, 2<<20); err != nil {
		t.Fatal(err)
	}
	c := fcspprom.NewCollector(pool)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	cached := value(t, c, "fcsp_tenant_memory_cached_bytes", "pooled")
	if cached < 1<<20 {
		t.Fatalf("pooled tenant caches %v bytes, want its freed 1 MiB block", cached)
	}
	used := value(t, c, "fcsp_tenant_memory_used_bytes", "pooled") + value(t, c, "fcsp_tenant_memory_used_bytes", "plain")
	poolUsed, poolCached := poolValue(t, c, "fcsp_pool_memory_used_bytes"), poolValue(t, c, "fcsp_pool_memory_cached_bytes")
	if poolCached != cached || poolUsed < used+poolCached || poolUsed != 2*32<<20 {
		t.Fatalf("pool: used %v, cached %v; tenants: used %v, cached %v; want the pool's used = the two 32 MiB chunks the tenants' pools map, which hold the tenants' used and cached bytes", poolUsed, poolCached, used, cached)
	}
}

// poolValue reads c's pool-wide metric named name.
func poolValue(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].Gauge.GetValue()
		}
	}
	t.Fatalf("no single %s", name)
	return 0
}

// Two pools (two GPUs) in one registry: each collector's const labels tell
// their series apart. Without them the second registration is refused.
func TestCollectorConstLabels(t *testing.T) {
	p0, p1 := openPool(t), openPool(t)
	newTenant(t, p0, "a")
	newTenant(t, p1, "a")
	newTenant(t, p1, "b")
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(fcspprom.NewCollector(p0)); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(fcspprom.NewCollector(p1)); err == nil {
		t.Fatal("a second unlabelled pool registered: its series would collide")
	}
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(fcspprom.NewCollector(p0, fcspprom.WithConstLabels(prometheus.Labels{"gpu": "0"})))
	reg.MustRegister(fcspprom.NewCollector(p1, fcspprom.WithConstLabels(prometheus.Labels{"gpu": "1"})))
	want := `
# HELP fcsp_pool_tenants Live tenants.
# TYPE fcsp_pool_tenants gauge
fcsp_pool_tenants{gpu="0"} 1
fcsp_pool_tenants{gpu="1"} 2
# HELP fcsp_tenant_partitioned 1 if the tenant has SMs of its own (a green context).
# TYPE fcsp_tenant_partitioned gauge
fcsp_tenant_partitioned{class="a",gpu="0"} 0
fcsp_tenant_partitioned{class="a",gpu="1"} 0
fcsp_tenant_partitioned{class="b",gpu="1"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fcsp_pool_tenants", "fcsp_tenant_partitioned"); err != nil {
		t.Fatal(err)
	}
	// The caller's map is copied: changing it later changes nothing.
	l := prometheus.Labels{"gpu": "2"}
	c := fcspprom.NewCollector(p0, fcspprom.WithConstLabels(l))
	l["gpu"] = "3"
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP fcsp_pool_tenants Live tenants.
# TYPE fcsp_pool_tenants gauge
fcsp_pool_tenants{gpu="2"} 1
`), "fcsp_pool_tenants"); err != nil {
		t.Fatal(err)
	}
}

// A pool's latency class has its moves' series from the start (at 0) and
// its target; the rest tenant it trades with has its SMs only.
func TestCollectorReportsALatencyClass(t *testing.T) {
	pool := openPool(t)
	newTenant(t, pool, "interactive", fcsp.WithLatencyTarget(300*time.Microsecond, 16, 48))
	newTenant(t, pool, "batch", fcsp.WithRestOfSMs())
	c := fcspprom.NewCollector(pool)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	if n := testutil.CollectAndCount(c, "fcsp_tenant_sm_moves_total"); n != 4 {
		t.Fatalf("%d move series, want the latency class's 4 (one per rule)", n)
	}
	if v := value(t, c, "fcsp_tenant_latency_target_seconds", "interactive"); v != 300e-6 {
		t.Fatalf("target %v s", v)
	}
	if v := value(t, c, "fcsp_tenant_sms", "batch"); v != 116 {
		t.Fatalf("batch on %v SMs", v)
	}
}

// A stalled tenant (fcsp.WithStallTimeout) shows as fcsp_tenant_stalled 1,
// and the pool says a restart is required while its neighbours serve.
func TestCollectorReportsAStall(t *testing.T) {
	pool, err := fcsp.Open(context.Background(), 0, fcsptest.SimulatedH200(), fcsp.WithStallTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() }) // names the stalled tenant
	stuck := newTenant(t, pool, "stuck", fcsp.WithSMs(16))
	newTenant(t, pool, "fine", fcsp.WithSMs(16))
	mod, err := stuck.LoadModule(kernels.ChainPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("spin")
	if err != nil {
		t.Fatal(err)
	}
	var a fcsp.Args
	a.Uint64(kernels.SpinForever)
	if err := stuck.Stream().Launch(context.Background(), fn, fcsp.Dim3{X: 1, Y: 1, Z: 1}, fcsp.Dim3{X: 32, Y: 1, Z: 1}, 0, &a); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !pool.Health().RestartRequired && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(fcspprom.NewCollector(pool))
	want := `
# HELP fcsp_pool_restart_required 1 once the process should be replaced (Health.RestartRequired): the device is lost, or a tenant stalled (the other tenants serve on).
# TYPE fcsp_pool_restart_required gauge
fcsp_pool_restart_required 1
# HELP fcsp_tenant_stalled 1 once the tenant's work made no progress for its stall timeout (WithStallTimeout): its calls are refused; its stuck work holds its SMs and memory until the process exits.
# TYPE fcsp_tenant_stalled gauge
fcsp_tenant_stalled{class="fine"} 0
fcsp_tenant_stalled{class="stuck"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fcsp_tenant_stalled", "fcsp_pool_restart_required"); err != nil {
		t.Fatal(err)
	}
}
