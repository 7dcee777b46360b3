package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The figures the Gateway API Inference Extension's model-server protocol
// asks of a model server (TotalQueuedRequests, TotalRunningRequests, and a
// memory utilisation in 0..1) are served per request class, as gauges, so
// that an endpoint picker can route each class across replicas: requests
// holding a stream are running, requests waiting for one are waiting, and
// the class's live memory over its quota is its memory usage.
func TestGatewayMetricsPerClass(t *testing.T) {
	cfg := testConfig(t, modePartitioned)
	cfg.Interactive.Streams, cfg.Batch.Streams = 1, 2
	gate := make(chan struct{})
	cfg.gate = gate // requests that hold a stream wait here, their memory allocated
	s := start(t, cfg)
	defer s.stop(t)

	var wg sync.WaitGroup
	for i := range 6 { // batch: 2 run, 3 wait; interactive: 1 runs
		class := "batch"
		if i == 5 {
			class = "interactive"
		}
		wg.Go(func() {
			if code, body := post(t, s.base+"/v1/"+class, ""); code != http.StatusOK {
				t.Errorf("%s: status %d: %s", class, code, body)
			}
		})
	}
	want := map[string]float64{
		`fcsp_server_requests_running{class="batch"}`:       2,
		`fcsp_server_requests_waiting{class="batch"}`:       3,
		`fcsp_server_requests_running{class="interactive"}`: 1,
		`fcsp_server_requests_waiting{class="interactive"}`: 0,
		// 16 KiB of the interactive class's 64 KiB quota, 2 x 256 KiB of
		// the batch class's 8 GiB.
		`fcsp_server_memory_usage_ratio{class="interactive"}`: 0.25,
		`fcsp_server_memory_usage_ratio{class="batch"}`:       float64(2*256<<10) / float64(8<<30),
	}
	waitMetrics(t, s.base, want)
	close(gate)
	wg.Wait()
	for k := range want {
		want[k] = 0
	}
	waitMetrics(t, s.base, want)

	// Gauges, with help, as Prometheus's text format gives them.
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"fcsp_server_requests_running", "fcsp_server_requests_waiting", "fcsp_server_memory_usage_ratio"} {
		if !strings.Contains(string(b), "# TYPE "+name+" gauge\n") || !strings.Contains(string(b), "# HELP "+name+" ") {
			t.Errorf("%s is not a gauge with help", name)
		}
	}
}

// waitMetrics scrapes until every series has its value (a request reaches
// its stream a moment after it is sent), or fails after 10 s.
func waitMetrics(t *testing.T, base string, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := scrape(t, base+"/metrics")
		var off []string
		for k, v := range want {
			if got, ok := m[k]; !ok {
				off = append(off, k+" absent")
			} else if got != v {
				off = append(off, fmt.Sprintf("%s = %v, want %v", k, got, v))
			}
		}
		if len(off) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %s", strings.Join(off, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
