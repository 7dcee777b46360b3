package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postWith posts an empty body to url with the headers given and decodes
// the class that served it.
func postWith(t *testing.T, url string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Class string `json:"class"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return resp.StatusCode, r.Class
}

// A request behind an inference gateway carries its objective
// (InferenceObjective) in a header; the server maps objectives to its
// classes (-objective premium=interactive) and serves the request in that
// class's tenant, whatever route it came by. The endpoint picker's current
// header and its older name (the Gateway API Inference Extension's) both
// count, the current one first; a request without one, or with an
// objective the map does not name, is served by its own route's class.
func TestObjectiveHeaderPicksTheClass(t *testing.T) {
	cfg := testConfig(t, modePartitioned)
	cfg.Objectives = map[string]string{"premium": "interactive", "bulk": "batch"}
	s := start(t, cfg)
	defer s.stop(t)
	for _, c := range []struct {
		path   string
		header map[string]string
		want   string
	}{
		{"/v1/batch", map[string]string{"x-gateway-inference-objective": "premium"}, "interactive"},
		{"/v1/interactive", map[string]string{"X-Gateway-Inference-Objective": "bulk"}, "batch"},
		{"/v1/batch", map[string]string{"x-llm-d-inference-objective": "premium"}, "interactive"},
		{"/v1/batch", map[string]string{"x-llm-d-inference-objective": "premium", "x-gateway-inference-objective": "bulk"}, "interactive"},
		{"/v1/batch", nil, "batch"},
		{"/v1/interactive", map[string]string{"x-gateway-inference-objective": "unknown"}, "interactive"},
	} {
		code, class := postWith(t, s.base+c.path, c.header)
		if code != http.StatusOK || class != c.want {
			t.Errorf("%s %v: %d, class %q; want 200 from %s", c.path, c.header, code, class, c.want)
		}
	}
	// The per-class series count where the request ran.
	m := scrape(t, s.base+"/metrics")
	if i, b := m[`fcsp_server_requests_total{class="interactive",code="200"}`], m[`fcsp_server_requests_total{class="batch",code="200"}`]; i != 4 || b != 2 {
		t.Errorf("requests: interactive %v, batch %v; want 4 and 2", i, b)
	}
}

// The map is given by flags (repeated, or comma-separated) or the config
// file, and must name the server's classes.
func TestObjectiveConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"-objective", "premium=interactive", "-objective", "bulk=batch,free=batch"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Objectives) != 3 || cfg.Objectives["premium"] != "interactive" || cfg.Objectives["free"] != "batch" {
		t.Fatalf("objectives %v", cfg.Objectives)
	}
	for _, bad := range [][]string{{"-objective", "premium=gold"}, {"-objective", "premium"}, {"-objective", "=batch"}} {
		if _, err := parseConfig(bad, io.Discard); err == nil || !strings.Contains(err.Error(), "-objective") {
			t.Errorf("parseConfig(%q): %v; want an error naming -objective", bad, err)
		}
	}
}
