package fcspprom

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// snapshot collects a given PoolStats through c's collect, so that figures
// the simulator does not produce yet can be checked.
type snapshot struct {
	c  *Collector
	ps fcsp.PoolStats
}

func (s snapshot) Describe(ch chan<- *prometheus.Desc) { s.c.Describe(ch) }
func (s snapshot) Collect(ch chan<- prometheus.Metric) {
	s.c.collect(func(m prometheus.Metric) { ch <- m }, s.ps)
}

// The exclusion's waits (Stats.ContextWait): a histogram in seconds (the
// calls as its count, the waits' total as its sum, Le as its buckets) and
// the waiters as a counter.
func TestCollectContextWait(t *testing.T) {
	var le [12]uint64
	for i := range le {
		le[i] = 963 + uint64(3*i) // every call that did not wait, then the waiters by bound
	}
	le[11] = 1000
	ps := fcsp.PoolStats{Tenants: []fcsp.Stats{
		{Name: "part", Partitioned: true, ContextWait: fcsp.WaitStats{Calls: 1000, Waited: 37,
			P50: 0, P99: 1500 * time.Microsecond, Max: 4 * time.Millisecond, Total: 50 * time.Millisecond, Le: le}},
		{Name: "whole"},
	}}
	s := snapshot{bare(), ps}
	if problems, err := testutil.CollectAndLint(s); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `
# HELP fcsp_tenant_context_wait_seconds How long calls (Do, and driver calls that need the context current) waited for one of a partitioned tenant's contexts, since the tenant was made; calls that found one free count as 0.
# TYPE fcsp_tenant_context_wait_seconds histogram
fcsp_tenant_context_wait_seconds_bucket{class="part",le="1e-05"} 963
fcsp_tenant_context_wait_seconds_bucket{class="part",le="2.5e-05"} 966
fcsp_tenant_context_wait_seconds_bucket{class="part",le="5e-05"} 969
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.0001"} 972
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.00025"} 975
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.0005"} 978
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.001"} 981
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.0025"} 984
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.005"} 987
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.01"} 990
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.025"} 993
fcsp_tenant_context_wait_seconds_bucket{class="part",le="0.1"} 1000
fcsp_tenant_context_wait_seconds_bucket{class="part",le="+Inf"} 1000
fcsp_tenant_context_wait_seconds_sum{class="part"} 0.05
fcsp_tenant_context_wait_seconds_count{class="part"} 1000
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="1e-05"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="2.5e-05"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="5e-05"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.0001"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.00025"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.0005"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.001"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.0025"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.005"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.01"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.025"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="0.1"} 0
fcsp_tenant_context_wait_seconds_bucket{class="whole",le="+Inf"} 0
fcsp_tenant_context_wait_seconds_sum{class="whole"} 0
fcsp_tenant_context_wait_seconds_count{class="whole"} 0
# HELP fcsp_tenant_context_waits_total Calls that found none of the tenant's contexts free and waited (0 for an unpartitioned tenant, whose context never excludes); over fcsp_tenant_context_wait_seconds_count, the fraction that waited.
# TYPE fcsp_tenant_context_waits_total counter
fcsp_tenant_context_waits_total{class="part"} 37
fcsp_tenant_context_waits_total{class="whole"} 0
`
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), "fcsp_tenant_context_wait_seconds", "fcsp_tenant_context_waits_total"); err != nil {
		t.Fatal(err)
	}
}

// Stats.Throttled holds Do's waits too; the launch series take them out,
// and the Do series carry them (the run of TestThrottleRatiosStayWithinOne,
// as numbers).
func TestCollectSplitsLaunchAndDoThrottling(t *testing.T) {
	ps := fcsp.PoolStats{Tenants: []fcsp.Stats{{Name: "share", Launches: 20, Throttled: 37, ThrottleWait: 90 * time.Millisecond,
		DoAdmitted: 20, DoThrottled: 18, DoThrottleWait: 60 * time.Millisecond}}}
	s := snapshot{bare(), ps}
	want := `
# HELP fcsp_tenant_launches_throttled_total Of the kernel launches admitted, those that had to wait for tokens: over fcsp_tenant_launches_admitted_total, the fraction throttled.
# TYPE fcsp_tenant_launches_throttled_total counter
fcsp_tenant_launches_throttled_total{class="share"} 19
# HELP fcsp_tenant_throttle_wait_seconds_total Time kernel launches spent waiting for tokens (Do's: fcsp_tenant_do_throttle_wait_seconds_total).
# TYPE fcsp_tenant_throttle_wait_seconds_total counter
fcsp_tenant_throttle_wait_seconds_total{class="share"} 0.03
# HELP fcsp_tenant_do_admitted_total Do calls admitted by the tenant's GPU-share bucket (WithGPUShare below 1, or with a bandwidth floor; other Do calls are not rate-limited and not counted).
# TYPE fcsp_tenant_do_admitted_total counter
fcsp_tenant_do_admitted_total{class="share"} 20
# HELP fcsp_tenant_do_throttled_total Of the Do calls admitted, those that had to wait for tokens: over fcsp_tenant_do_admitted_total, the fraction throttled.
# TYPE fcsp_tenant_do_throttled_total counter
fcsp_tenant_do_throttled_total{class="share"} 18
# HELP fcsp_tenant_do_throttle_wait_seconds_total Time Do calls spent waiting for GPU-share tokens.
# TYPE fcsp_tenant_do_throttle_wait_seconds_total counter
fcsp_tenant_do_throttle_wait_seconds_total{class="share"} 0.06
`
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), "fcsp_tenant_launches_throttled_total",
		"fcsp_tenant_throttle_wait_seconds_total", "fcsp_tenant_do_admitted_total", "fcsp_tenant_do_throttled_total",
		"fcsp_tenant_do_throttle_wait_seconds_total"); err != nil {
		t.Fatal(err)
	}
}

// bare is a collector of no pool, for snapshots.
func bare() *Collector { return newCollector(nil, nil) }

// A latency class's SM moves, by the rule that made each, and its target;
// other tenants have neither series.
func TestCollectSMMoves(t *testing.T) {
	ps := fcsp.PoolStats{Tenants: []fcsp.Stats{
		{Name: "interactive", SMs: 48, Partitioned: true, LatencyTarget: 300 * time.Microsecond, SMMoves: 10,
			SMMovesBy: fcsp.SMMoveCounts{GrowLoad: 4, GrowP99: 1, Shrink: 4, Trim: 1}},
		{Name: "batch", SMs: 84, Partitioned: true},
	}}
	s := snapshot{bare(), ps}
	if problems, err := testutil.CollectAndLint(s); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `
# HELP fcsp_tenant_sm_moves_total Moves of a latency class's SMs (WithLatencyTarget) by the pool's controller, by the rule that made each: grow_load (more requests in flight than its SMs were sized for), grow_p99 (its recent P99 over target, two requests or more over it, further apart than a host stall), shrink (the load asked for less for 50 ms, 15 ms for the floor once the burst is over, the P99 within target or nothing in flight), trim (a full load's P99 within 85% of target, and within it scaled to a step less: one step less for bursts). Only for a latency class; fcsp_tenant_sms says where its SMs and the rest tenant's are now.
# TYPE fcsp_tenant_sm_moves_total counter
fcsp_tenant_sm_moves_total{class="interactive",reason="grow_load"} 4
fcsp_tenant_sm_moves_total{class="interactive",reason="grow_p99"} 1
fcsp_tenant_sm_moves_total{class="interactive",reason="shrink"} 4
fcsp_tenant_sm_moves_total{class="interactive",reason="trim"} 1
# HELP fcsp_tenant_latency_target_seconds WithLatencyTarget: the P99 the latency class's controller holds its requests to; only for a latency class.
# TYPE fcsp_tenant_latency_target_seconds gauge
fcsp_tenant_latency_target_seconds{class="interactive"} 0.0003
# HELP fcsp_tenant_sms SMs the tenant runs on (unpartitioned: those no partition holds, shared; the whole device while no partition exists).
# TYPE fcsp_tenant_sms gauge
fcsp_tenant_sms{class="batch"} 84
fcsp_tenant_sms{class="interactive"} 48
`
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), "fcsp_tenant_sm_moves_total", "fcsp_tenant_latency_target_seconds", "fcsp_tenant_sms"); err != nil {
		t.Fatal(err)
	}
}
