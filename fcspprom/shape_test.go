package fcspprom_test

import (
	"context"
	"errors"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcspprom"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// gather registers c in a pedantic registry and gathers it, by family name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func label(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

func openSim(t *testing.T) *fcsp.Pool {
	t.Helper()
	pool, err := fcsp.Open(context.Background(), 0, fcsptest.SimulatedH200())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// go doc fcspprom.Option shows no unexported type: an Option is opaque, as
// fcsp's are.
func TestOptionShowsNoUnexportedType(t *testing.T) {
	fs := token.NewFileSet()
	pkgs, err := parser.ParseDir(fs, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	d := doc.New(pkgs["fcspprom"], "fcspprom", 0)
	for _, ty := range d.Types {
		if ty.Name != "Option" {
			continue
		}
		var b strings.Builder // as go doc prints it: unexported fields filtered out
		if err := printer.Fprint(&b, fs, ty.Decl); err != nil {
			t.Fatal(err)
		}
		if decl := b.String(); strings.Contains(decl, "options") {
			t.Fatalf("go doc shows %q: an unexported type in the exported one", decl)
		}
		return
	}
	t.Fatal("no type Option")
}

// A zero Option (what a nil one was) is refused where the collector is
// registered, saying which option, rather than skipped.
func TestZeroOptionIsRefused(t *testing.T) {
	pool := openSim(t)
	var zero fcspprom.Option
	reg := prometheus.NewRegistry()
	err := reg.Register(fcspprom.NewCollector(pool, fcspprom.WithMaxAge(0), zero))
	if err == nil || !errors.Is(err, fcsp.ErrInvalidArgument) || !strings.Contains(err.Error(), "option 2") {
		t.Fatalf("Register with a zero option: %v; want fcsp.ErrInvalidArgument naming option 2", err)
	}
	if _, err := fcspprom.NewGatherer(pool, zero).Gather(); !errors.Is(err, fcsp.ErrInvalidArgument) {
		t.Fatalf("NewGatherer with a zero option: %v; want fcsp.ErrInvalidArgument", err)
	}
}

// Every tenant series names its class with the label the server's own
// series use, class; a GPU time series names its stream class
// stream_class.
func TestTenantSeriesAreLabelledClass(t *testing.T) {
	pool := openSim(t)
	a, err := pool.NewTenant("interactive", fcsp.WithSMs(16), fcsp.WithGPUMetering())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for name, mf := range gather(t, fcspprom.NewCollector(pool)) {
		if !strings.HasPrefix(name, "fcsp_tenant_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			if _, ok := label(m, "tenant"); ok {
				t.Errorf("%s has a tenant label", name)
			}
			if v, ok := label(m, "class"); !ok || v != "interactive" {
				t.Errorf("%s: class label %q, want interactive", name, v)
			}
		}
	}
}

// The device's facts: name and UUID as an info metric, its SMs as a gauge.
func TestDeviceMetrics(t *testing.T) {
	pool := openSim(t)
	mfs := gather(t, fcspprom.NewCollector(pool))
	info := mfs["fcsp_device_info"]
	if info == nil || len(info.GetMetric()) != 1 || info.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("fcsp_device_info: %v", info)
	}
	d := pool.Device()
	m := info.GetMetric()[0]
	for k, want := range map[string]string{"name": d.Name, "uuid": d.UUID, "simulated": "true"} {
		if got, _ := label(m, k); got != want {
			t.Errorf("fcsp_device_info %s=%q, want %q", k, got, want)
		}
	}
	sms := mfs["fcsp_device_sms"]
	if sms == nil || sms.GetMetric()[0].GetGauge().GetValue() != float64(d.SMs) {
		t.Fatalf("fcsp_device_sms: %v, want %d", sms, d.SMs)
	}
}

// A tenant with no quota of its own has no limit series: the device's
// limit is fcsp_pool_memory_limit_bytes, and a copy per tenant would read
// as memory set aside for it.
func TestNoQuotaNoLimitSeries(t *testing.T) {
	pool := openSim(t)
	q, err := pool.NewTenant("quota", fcsp.WithMemoryQuota(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	n, err := pool.NewTenant("none")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	mf := gather(t, fcspprom.NewCollector(pool))["fcsp_tenant_memory_limit_bytes"]
	if mf == nil || len(mf.GetMetric()) != 1 {
		t.Fatalf("fcsp_tenant_memory_limit_bytes: %v; want the quota tenant's only", mf)
	}
	if c, _ := label(mf.GetMetric()[0], "class"); c != "quota" || mf.GetMetric()[0].GetGauge().GetValue() != 64<<20 {
		t.Fatalf("fcsp_tenant_memory_limit_bytes: %v", mf.GetMetric()[0])
	}
}

// The waits for a partitioned tenant's contexts are a histogram, which
// adds up across tenants and replicas: count = the calls that took a
// context, the waiter in the bucket of its wait, every other call in the
// first.
func TestContextWaitIsAHistogram(t *testing.T) {
	pool := openSim(t)
	tn, err := pool.NewTenant("part", fcsp.WithSMs(16), fcsp.WithConcurrentDos(1))
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	ctx := context.Background()
	held, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = tn.Do(ctx, func(fcsp.Current) error { close(held); <-release; return nil })
	})
	<-held
	wg.Go(func() { _ = tn.Do(ctx, func(fcsp.Current) error { return nil }) })
	time.Sleep(20 * time.Millisecond) // the second Do waits this long for the one context
	close(release)
	wg.Wait()
	mfs := gather(t, fcspprom.NewCollector(pool))
	mf := mfs["fcsp_tenant_context_wait_seconds"]
	if mf == nil || mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("fcsp_tenant_context_wait_seconds: %v; want a histogram", mf)
	}
	h := mf.GetMetric()[0].GetHistogram()
	st := tn.Stats().ContextWait
	if h.GetSampleCount() != st.Calls || st.Calls < 2 {
		t.Fatalf("count %d, calls %d", h.GetSampleCount(), st.Calls)
	}
	if s := h.GetSampleSum(); s < 0.015 || s > 5 {
		t.Fatalf("sum %v s; want the one wait of about 20 ms", s)
	}
	b := h.GetBucket()
	if b[0].GetCumulativeCount() != st.Calls-1 {
		t.Fatalf("first bucket (le %v) %d; want every call but the waiter's", b[0].GetUpperBound(), b[0].GetCumulativeCount())
	}
	for _, q := range []string{"fcsp_tenant_context_wait_p50_seconds", "fcsp_tenant_context_wait_p99_seconds", "fcsp_tenant_context_wait_max_seconds"} {
		if mfs[q] != nil {
			t.Errorf("%s is still served beside the histogram", q)
		}
	}
}
