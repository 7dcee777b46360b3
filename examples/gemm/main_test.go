package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// Without a device (or without cuBLAS) the example says so and succeeds. An
// explicit -cublas path is used as given: on a GPU machine, even after a
// test in this process loaded the real cuBLAS, a missing path says "no
// cuBLAS". (Its name avoids "GPU" so that gpu-test.sh's -test.run GPU does
// not pick it; run it there with -test.run WithoutDevice.)
func TestWithoutDeviceOrCublasSaysSoAndExitsZero(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-cublas", filepath.Join(t.TempDir(), "libcublas-missing.so"), "-duration", "10ms"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	p, perr := fcsp.Open(context.Background(), 0)
	if errors.Is(perr, fcsp.ErrNoDriver) {
		if !strings.Contains(out.String(), "no GPU here") {
			t.Fatalf("output %q does not say there is no GPU", out.String())
		}
		return
	}
	if perr == nil {
		p.Close()
	}
	if !strings.Contains(out.String(), "no cuBLAS") {
		t.Fatalf("output %q does not say cuBLAS is missing", out.String())
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-modes", "nope"}, {"-duration", "0s"}, {"-mps-role", "both"}} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestChartAndJSON(t *testing.T) {
	dir := t.TempDir()
	r := report{Modes: []Result{{Mode: "shared", P99us: 1300, BatchTFLOPs: 770}, {Mode: "part16", P99us: 45, BatchTFLOPs: 700}},
		Sweep: []SweepRow{{SMs: 132, TFLOPs: 889, RatioLinear: 1}, {SMs: 8, Partitioned: true, TFLOPs: 55, RatioLinear: 0.99}}}
	var out bytes.Buffer
	if err := r.write(&out, filepath.Join(dir, "g.json"), filepath.Join(dir, "g.png")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"g.json", "g.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if !strings.Contains(out.String(), "ratio to linear") {
		t.Fatal(out.String())
	}
}
