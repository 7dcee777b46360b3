package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain()) // the test binary is the child too
	}
	os.Exit(m.Run())
}

// Two processes on the simulator sharing a real region: the child faults
// and is killed; the parent serves throughout and the shared total heals to
// exactly its own usage.
func TestFaultDomainOnTheSimulator(t *testing.T) {
	cfg := config{sim: true, region: filepath.Join(t.TempDir(), "region"), hold: 256 << 20, serve: 50 * time.Millisecond}
	r, err := run(context.Background(), cfg, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Simulated {
		t.Fatal("expected the simulator")
	}
	if r.PeakShared < cfg.hold {
		t.Fatalf("shared total %d while the child held %d", r.PeakShared, cfg.hold)
	}
	if !strings.Contains(r.ChildFault, "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Fatalf("child's fault: %s", r.ChildFault)
	}
	if r.Served == 0 || r.FinalShared >= cfg.hold {
		t.Fatalf("served %d, final shared total %d", r.Served, r.FinalShared)
	}
	t.Logf("served %d (%d during the fault), healed in %v", r.Served, r.ServedDuringFault, r.HealedIn)
}
