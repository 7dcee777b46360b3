package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A body is one JSON object and nothing after it: `{"n":16} garbage` was
// served as n=16 (issue 58).
func TestBodyWithTrailingDataIsRefused(t *testing.T) {
	s := start(t, testConfig(t, modePartitioned))
	defer s.stop(t)
	for _, body := range []string{`{"n":16} garbage`, `{"n":16}{"n":17}`, `{"n":16} 5`, `{"n":16}]`} {
		if code, got := post(t, s.base+"/v1/interactive", body); code != http.StatusBadRequest || !strings.Contains(string(got), "after the JSON object") {
			t.Errorf("body %q: status %d, %s; want 400 naming the trailing data", body, code, got)
		}
	}
	for _, body := range []string{``, `{"n":16}`, "{\"n\":16}\n", ` {"n": 16} `} {
		if code, got := post(t, s.base+"/v1/interactive", body); code != http.StatusOK {
			t.Errorf("body %q: status %d, %s; want 200", body, code, got)
		}
	}
}

// A request's n is capped by default: -<class>-max-n left at 0 allows 16
// times the class's n, not whatever the quota allows (one batch request of
// n=2^31-1, inside the default 8 GiB quota, stopped all serving on the
// simulator: issue 58). The flags' usage says so.
func TestRequestSizeIsCappedByDefault(t *testing.T) {
	cfg := testConfig(t, modePartitioned)
	cfg.Interactive.Quota = 0 // the device's: only the cap refuses
	s := start(t, cfg)
	defer s.stop(t)
	capN := maxNFactor * cfg.Interactive.N
	code, body := post(t, s.base+"/v1/interactive", fmt.Sprintf(`{"n": %d}`, capN+1))
	if code != http.StatusBadRequest || !strings.Contains(string(body), fmt.Sprintf("at most %d", capN)) {
		t.Errorf("n past the default cap: status %d, %s; want 400 naming the cap %d", code, body, capN)
	}
	if code, body := post(t, s.base+"/v1/batch", `{"n": 2147483647}`); code != http.StatusBadRequest {
		t.Errorf("n=2^31-1: status %d, %s; want 400", code, body)
	}
	if code, body := post(t, s.base+"/v1/interactive", fmt.Sprintf(`{"n": %d}`, capN)); code != http.StatusOK {
		t.Errorf("n at the cap: status %d, %s; want 200", code, body)
	}

	var usage bytes.Buffer
	if _, err := parseConfig([]string{"-h"}, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"0: 16 x the class's n", "the whole request (waiting, launch, kernel)"} {
		if !strings.Contains(usage.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, usage.String())
		}
	}
}

// The class's deadline bounds the whole request, the wait for its kernel
// included: a request whose kernel outlasts it gets 503, not its result
// when the kernel ends. (On a GPU the launch returns at once and the 503
// comes at the deadline; the simulator runs the kernel's Go model inside
// the launch on an idle stream, so it comes when the launch returns.)
func TestDeadlineBoundsTheKernelWait(t *testing.T) {
	cfg := testConfig(t, modePartitioned)
	// About 0.4 s of the chain's Go model on the simulator; the deadline 50 ms.
	cfg.Batch.N, cfg.Batch.Steps, cfg.Batch.Timeout = 65536, 500, Duration(50*time.Millisecond)
	s := start(t, cfg)
	defer s.stop(t)
	t0 := time.Now()
	code, body := post(t, s.base+"/v1/batch", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), "deadline") {
		t.Errorf("status %d after %v, %s; want 503: the kernel outlasted the 50ms deadline", code, time.Since(t0), body)
	}
}
