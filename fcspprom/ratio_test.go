package fcspprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcspprom"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// value reads one series of c's metric named name, of the tenant named.
func value(t *testing.T, c prometheus.Collector, name, tenant string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "class" && l.GetValue() == tenant {
					if m.Counter != nil {
						return m.Counter.GetValue()
					}
					return m.Gauge.GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{class=%q}", name, tenant)
	return 0
}

// 20 kernel launches and 20 Do calls on a GPU-share tenant, both held back
// by the share: each throttle count stays within its own admissions. (Before,
// launches_throttled_total counted Do's waits too and read about twice
// launches_admitted_total.)
func TestThrottleRatiosStayWithinOne(t *testing.T) {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200(), fcsp.WithLimiterTuning(fcsp.LimiterTuning{RefillPeriod: 2 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tn, err := pool.NewTenant("share", fcsp.WithGPUShare(0.25))
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	mod, err := tn.LoadModule(kernels.ChainPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("spin")
	if err != nil {
		t.Fatal(err)
	}
	var args fcsp.Args
	one := fcsp.Dim3{X: 1, Y: 1, Z: 1}
	// Library work of about 3 ms, more than the bucket holds (a refill
	// period, 2 ms) once a launch's charge is refunded: on the simulator a
	// Do's GPU time is its stream's bracket, from taking the handle to f's
	// return.
	lib := func(cur fcsp.Current) error {
		_, err := cur.Stream(nil)
		time.Sleep(3 * time.Millisecond)
		return err
	}
	for i := range uint32(20) {
		// A shape not launched before is charged a whole refill period:
		// each launch costs enough to wait.
		grid := fcsp.Dim3{X: 1 + i, Y: 1, Z: 1}
		if err := tn.Stream().Launch(ctx, fn, grid, one, 0, args.Reset().Uint64(1)); err != nil {
			t.Fatal(err)
		}
		if err := tn.Do(ctx, lib); err != nil {
			t.Fatal(err)
		}
	}
	if err := tn.Stream().Synchronize(); err != nil {
		t.Fatal(err)
	}
	c := fcspprom.NewCollector(pool)
	t.Logf("Stats: %d launches, %d Dos admitted; %d waited, %d of them Dos", tn.Stats().Launches, tn.Stats().DoAdmitted, tn.Stats().Throttled, tn.Stats().DoThrottled)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	get := func(name string) float64 { return value(t, c, name, "share") }
	launches, throttled := get("fcsp_tenant_launches_admitted_total"), get("fcsp_tenant_launches_throttled_total")
	if launches != 20 || throttled > launches {
		t.Fatalf("%v of %v launches throttled: want 20 launches, a ratio within 1", throttled, launches)
	}
	dos, doThrottled := get("fcsp_tenant_do_admitted_total"), get("fcsp_tenant_do_throttled_total")
	if dos != 20 || doThrottled > dos {
		t.Fatalf("%v of %v Dos throttled: want 20 Dos, a ratio within 1", doThrottled, dos)
	}
	if throttled == 0 || doThrottled == 0 {
		t.Fatalf("%v launches and %v Dos waited: the share did not hold both back, so this run proves nothing", throttled, doThrottled)
	}
	st := tn.Stats()
	if st.Throttled != uint64(throttled+doThrottled) {
		t.Fatalf("Stats.Throttled %d, want the launches' %v plus the Dos' %v", st.Throttled, throttled, doThrottled)
	}
}
