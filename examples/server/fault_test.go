package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// A sticky fault anywhere in the process: /healthz answers 503 (the
// liveness probe fails and the container is replaced) and every request
// gets a typed 503 with Retry-After at once.
func TestServerDeviceLost(t *testing.T) {
	s := start(t, testConfig(t, modePartitioned))
	defer s.stop(t)
	if code, body := post(t, s.base+"/v1/interactive", ""); code != http.StatusOK {
		t.Fatalf("before the fault: %d %s", code, body)
	}
	// A kernel of the process writes where no allocation is.
	ctx := context.Background()
	tn, err := s.pool.NewTenant("faulty")
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	mod, err := tn.LoadModule(kernels.ChainPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("chain")
	if err != nil {
		t.Fatal(err)
	}
	var a fcsp.Args
	a.Ptr(0x10).Int32(256).Int32(1)
	err = tn.Stream().Launch(ctx, fn, fcsp.Dim3{X: 1, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &a)
	if err == nil {
		err = tn.Stream().Synchronize()
	}
	if !s.pool.Health().RestartRequired {
		t.Fatalf("the fault did not lose the pool: %v", err)
	}

	resp, err := http.Get(s.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/healthz on a lost device: %d, want 503", resp.StatusCode)
	}
	for _, class := range []string{"interactive", "batch"} {
		start := time.Now()
		resp, err := http.Post(s.base+"/v1/"+class, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s on a lost device: %d, Retry-After %q; want 503 with Retry-After", class, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s took %v on a lost device; want an answer at once", class, d)
		}
	}
}
