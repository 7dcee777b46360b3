package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// On the simulator the run makes its classes under the limit, samples the
// fake's figure (NVML's stand-in) at every row beside the pool's, and
// finds the memory the SDK made within the limit; the fake holds what the
// pool counts, so nothing is unaccounted.
func TestRunsOnTheSimulator(t *testing.T) {
	c, err := parse([]string{"-sim", "-duration", "300ms", "-sample", "50ms", "-limit", "2048"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	t0 := time.Now()
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatal(err, out.String())
	}
	t.Log(out.String())
	if took := time.Since(t0); took > 5*time.Second {
		t.Errorf("took %v for a 300 ms run", took)
	}
	for _, want := range []string{"simulated", "latency class", "rest class", "never past it", "the process as NVML saw it: at most"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Count(out.String(), " run ") < 3 {
		t.Errorf("fewer than 3 samples while the requests ran")
	}
}

// A limit smaller than the latency class's warmed green contexts (80 of
// 4 MiB, and the rest class's) refuses the class and says why.
func TestALimitTheClassesDoNotFit(t *testing.T) {
	c, err := parse([]string{"-sim", "-duration", "100ms", "-limit", "256"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(context.Background(), c, &out)
	if err == nil || !strings.Contains(err.Error(), "a green context holds 4 MiB") {
		t.Fatalf("err %v, want the latency class refused for its green contexts", err)
	}
}

func TestHandleNeedsAGPU(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), config{handle: true, sim: true, handles: 1}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "needs a GPU and cuBLAS") {
		t.Fatal(out.String())
	}
}

// A limit the requests' memory does not fit: some goroutines are refused
// (ErrQuotaExceeded), the run goes on and says so, and the memory the SDK
// made never passes the limit.
func TestRequestsRefusedByTheLimit(t *testing.T) {
	c, err := parse([]string{"-sim", "-duration", "200ms", "-sample", "50ms", "-limit", "800"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), c, &out); err != nil {
		t.Fatal(err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"refused by the limit (it held)", "never past it"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
