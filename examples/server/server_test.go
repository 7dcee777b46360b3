package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// testConfig is a simulated server with sizes the fake driver runs fast and
// an interactive quota of 64 KiB: 4096 elements (16 KiB) fit, 32768 do not.
func testConfig(t *testing.T, mode string) config {
	cfg := defaultConfig()
	cfg.Mode, cfg.Simulate = mode, true
	cfg.Interactive.N, cfg.Interactive.Steps, cfg.Interactive.Quota = 4096, 16, 64<<10
	cfg.Batch.N, cfg.Batch.Steps = 65536, 16
	cfg.ShutdownTimeout = Duration(5 * time.Second)
	cfg.logOut = testWriter{t}
	return cfg
}

// testWriter sends the server's logs to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// started is a server running in the background.
type started struct {
	base   string
	pool   *fcsp.Pool
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg config) *started {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan *fcsp.Pool, 1)
	cfg.onReady = func(p *fcsp.Pool) { ready <- p }
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{base: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, cfg, ln) }()
	select {
	case s.pool = <-ready:
	case err := <-s.done:
		cancel()
		t.Fatalf("server did not start: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("server not ready after 10s")
	}
	return s
}

// stop cancels the server's context and checks that it shut down cleanly
// and closed its tenants itself.
func (s *started) stop(t *testing.T) {
	t.Helper()
	// An idle keep-alive connection the client dialled but never used is
	// "new" to the server, and Shutdown waits 5 s before it counts as idle.
	http.DefaultClient.CloseIdleConnections()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server still running 10s after cancel")
	}
	if left := s.pool.Tenants(); len(left) != 0 {
		t.Errorf("tenants left after shutdown: %q", left)
	}
	if used := s.pool.MemoryUsed(); used != 0 {
		t.Errorf("pool memory used after shutdown: %d bytes", used)
	}
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestServerEndToEnd(t *testing.T) {
	s := start(t, testConfig(t, modePartitioned))

	for _, c := range []struct {
		class string
		n     int
		sms   int
	}{{"interactive", 4096, 16}, {"batch", 65536, 116}} {
		code, body := post(t, s.base+"/v1/"+c.class, "")
		if code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", c.class, code, body)
		}
		var r response
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("%s: %v in %s", c.class, err, body)
		}
		if r.Class != c.class || r.N != c.n || r.Steps != 16 || r.SMs != c.sms || r.Verified != 16 || r.LatencyMs <= 0 {
			t.Errorf("%s: unexpected response %+v", c.class, r)
		}
	}

	// Over quota: 32768 elements are 128 KiB against a 64 KiB quota.
	code, body := post(t, s.base+"/v1/interactive", `{"n": 32768}`)
	if code != http.StatusTooManyRequests || !strings.Contains(string(body), "exceed the tenant limit") {
		t.Errorf("over-quota request: status %d, body %s; want 429 and the quota error", code, body)
	}
	if code, body := post(t, s.base+"/v1/interactive", `{"n": "lots"}`); code != http.StatusBadRequest {
		t.Errorf("bad body: status %d, body %s; want 400", code, body)
	}
	if resp, err := http.Get(s.base + "/v1/interactive"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/interactive: %v %v; want 405", resp.Status, err)
	}

	// Both classes at once, more requests than streams, for the race detector.
	var wg sync.WaitGroup
	for i := range 8 {
		class := []string{"interactive", "batch"}[i%2]
		wg.Go(func() {
			if code, body := post(t, s.base+"/v1/"+class, ""); code != http.StatusOK {
				t.Errorf("concurrent %s: status %d: %s", class, code, body)
			}
		})
	}
	wg.Wait()

	m := scrape(t, s.base+"/metrics")
	for name, want := range map[string]float64{
		`fcsp_tenant_sms{class="interactive"}`:                            16,
		`fcsp_tenant_sms{class="batch"}`:                                  116,
		`fcsp_tenant_partitioned{class="interactive"}`:                    1,
		`fcsp_tenant_memory_limit_bytes{class="interactive"}`:             64 << 10,
		`fcsp_tenant_memory_limit_bytes{class="batch"}`:                   8 << 30,
		`fcsp_tenant_memory_used_bytes{class="interactive"}`:              0,
		`fcsp_tenant_memory_used_bytes{class="batch"}`:                    0,
		`fcsp_tenant_sm_limit_ratio{class="batch"}`:                       0.5,
		`fcsp_tenant_launches_admitted_total{class="interactive"}`:        5,
		`fcsp_tenant_launches_admitted_total{class="batch"}`:              5,
		`fcsp_server_requests_total{class="interactive",code="200"}`:      5,
		`fcsp_server_requests_total{class="interactive",code="429"}`:      1,
		`fcsp_server_requests_total{class="interactive",code="400"}`:      1,
		`fcsp_server_requests_total{class="batch",code="200"}`:            5,
		`fcsp_server_request_duration_seconds_count{class="interactive"}`: 7,
		`fcsp_server_launch_wait_seconds_count{class="batch"}`:            5,
	} {
		got, ok := m[name]
		if !ok {
			t.Errorf("/metrics lacks %s", name)
		} else if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// Nothing is allocated between requests; what the pool counts is what
	// the tenants' pools map: whole 32 MiB chunks, which hold the blocks
	// the tenants keep for reuse.
	if used, cached := m[`fcsp_pool_memory_used_bytes`], m[`fcsp_tenant_memory_cached_bytes{class="interactive"}`]+m[`fcsp_tenant_memory_cached_bytes{class="batch"}`]; used < cached || uint64(used)%(32<<20) != 0 {
		t.Errorf("fcsp_pool_memory_used_bytes = %v, want the whole chunks that hold the tenants' cached blocks, %v", used, cached)
	}
	if _, ok := m[`fcsp_tenant_throttle_wait_seconds_total{class="batch"}`]; !ok {
		t.Error("/metrics lacks the batch tenant's throttle wait")
	}

	s.stop(t)
}

// TestServerModes starts each mode and runs one request of each class.
func TestServerModes(t *testing.T) {
	for _, c := range []struct {
		mode                    string
		interactiveSMs, batchSM int
		batchLimit              float64
	}{{modeShared, 132, 132, 0}, {modeRateLimit, 132, 132, 0.5}, {modePartitioned, 16, 116, 0.5}} {
		t.Run(c.mode, func(t *testing.T) {
			s := start(t, testConfig(t, c.mode))
			defer s.stop(t)
			var h health
			getJSON(t, s.base+"/healthz", &h)
			if h.Status != "ok" || h.Mode != c.mode || !h.Simulated {
				t.Errorf("healthz %+v", h)
			}
			for _, class := range []string{"interactive", "batch"} {
				if code, body := post(t, s.base+"/v1/"+class, ""); code != http.StatusOK {
					t.Errorf("%s: status %d: %s", class, code, body)
				}
			}
			m := scrape(t, s.base+"/metrics")
			if got := m[`fcsp_tenant_sms{class="interactive"}`]; got != float64(c.interactiveSMs) {
				t.Errorf("interactive SMs %v, want %d", got, c.interactiveSMs)
			}
			if got := m[`fcsp_tenant_sms{class="batch"}`]; got != float64(c.batchSM) {
				t.Errorf("batch SMs %v, want %d", got, c.batchSM)
			}
			if got := m[`fcsp_tenant_sm_limit_ratio{class="batch"}`]; got != c.batchLimit {
				t.Errorf("batch SM limit %v, want %v", got, c.batchLimit)
			}
		})
	}
}

// -interactive-latency-critical and -batch-bandwidth-floor reach the
// tenants: the metrics show the priority and the floor, and both classes
// still serve.
func TestServerPriorityAndFloor(t *testing.T) {
	cfg := testConfig(t, modePartitioned)
	cfg.Batch.SMLimit, cfg.Batch.GPUShare = 0, 0.9
	cfg.Interactive.LatencyCritical, cfg.Batch.BandwidthFloor = true, 0.5
	s := start(t, cfg)
	defer s.stop(t)
	for _, class := range []string{"interactive", "batch"} {
		if code, body := post(t, s.base+"/v1/"+class, ""); code != http.StatusOK {
			t.Errorf("%s: status %d: %s", class, code, body)
		}
	}
	m := scrape(t, s.base+"/metrics")
	if got := m[`fcsp_tenant_latency_critical{class="interactive"}`]; got != 1 {
		t.Errorf("interactive latency_critical %v, want 1", got)
	}
	if got := m[`fcsp_tenant_latency_critical{class="batch"}`]; got != 0 {
		t.Errorf("batch latency_critical %v, want 0", got)
	}
	if got := m[`fcsp_tenant_bandwidth_floor_ratio{class="batch"}`]; got != 0.5 {
		t.Errorf("batch floor %v, want 0.5", got)
	}
}

func TestPartitionMustBeWholeGroups(t *testing.T) {
	cfg := testConfig(t, modePartitioned)
	cfg.Interactive.SMs = 12
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = run(context.Background(), cfg, ln)
	if err == nil || !strings.Contains(err.Error(), "multiple of 8") {
		t.Fatalf("run with -interactive-sms 12: %v; want an error naming the 8-SM unit", err)
	}
}

func TestConfigFileAndFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.json")
	file := `{"mode": "ratelimit", "interactive": {"quota": 4096, "timeout": "250ms"}, "batch": {"sm_limit": 0.25}}`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig([]string{"-config", path, "-batch-sm-limit", "0.75"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != modeRateLimit || cfg.Interactive.Quota != 4096 || time.Duration(cfg.Interactive.Timeout) != 250*time.Millisecond {
		t.Errorf("file not applied: %+v", cfg)
	}
	if cfg.Batch.SMLimit != 0.75 {
		t.Errorf("batch SM limit %v: the flag should override the file's 0.25", cfg.Batch.SMLimit)
	}
	if cfg.Interactive.Streams != 4 {
		t.Errorf("interactive streams %d: keys missing from the file should keep their defaults", cfg.Interactive.Streams)
	}
	for _, bad := range [][]string{{"-mode", "fast"}, {"-batch-sm-limit", "2"}, {"-interactive-streams", "0"},
		{"-batch-bandwidth-floor", "1.5"}, {"-batch-bandwidth-floor", "-0.1"}, {"-batch-sm-limit", "0.5", "-batch-bandwidth-floor", "0.5"}} {
		if _, err := parseConfig(bad, io.Discard); err == nil {
			t.Errorf("parseConfig(%q) accepted", bad)
		}
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// scrape reads the text exposition format into series -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatal(fmt.Errorf("metrics line %q: %w", line, err))
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}
