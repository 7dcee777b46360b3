package fcspprom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Issue 39 #14: one tenant whose name is not valid UTF-8 (NewTenant now
// refuses it; a Stats from elsewhere may still carry one) does not fail
// the scrape: every other tenant's series are served, and the bad one's
// under its name with the invalid bytes replaced, unless that name is
// taken (by a tenant whose name it is, or by another bad one).
func TestScrapeSurvivesBadTenantName(t *testing.T) {
	ps := fcsp.PoolStats{Tenants: []fcsp.Stats{
		{Name: "bad\xfe", Launches: 1},
		{Name: "bad\xff", Launches: 2},
		{Name: "good", Launches: 3},
		{Name: "x\xff", Launches: 4},
		{Name: "x\uFFFD", Launches: 5},
	}}
	reg := prometheus.NewRegistry()
	if err := reg.Register(snapshot{bare(), ps}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "fcsp_tenant_launches_admitted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"bad\uFFFD": 1, "good": 3, "x\uFFFD": 5}
	if len(got) != len(want) {
		t.Fatalf("launch series %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("launch series %v; want %v", got, want)
		}
	}
}
