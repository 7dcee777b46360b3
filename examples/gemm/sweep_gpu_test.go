package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// TestGPUSweepReportsClocks: a short sweep (8 SMs with and without the SM
// count hint, the rest, 300 ms each) on the device: every row has NVML
// samples with an SM clock and a power draw, a TFLOP/s and both ratios;
// gemmjob tells cuBLAS the tenant's SM count unless asked not to. About
// 4 s.
func TestGPUSweepReportsClocks(t *testing.T) {
	ctx := context.Background()
	pool, path := openWithCublas(t)
	tn, err := pool.NewTenant("hint", fcsp.WithSMs(8))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts []gemmjob.Option
		want int
	}{{nil, tn.SMs()}, {[]gemmjob.Option{gemmjob.WithoutSmCountTarget()}, 0}} {
		j, err := gemmjob.New(ctx, tn, interM, interN, interK, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		err = errors.Join(j.Run(ctx), j.Check(), j.Close(ctx))
		if err != nil || j.SmCountTarget != c.want {
			t.Fatalf("SmCountTarget %d, want %d (%v)", j.SmCountTarget, c.want, err)
		}
	}
	if err := errors.Join(tn.Close(), pool.Close()); err != nil {
		t.Fatal(err)
	}

	js := filepath.Join(t.TempDir(), "sweep.json")
	var out bytes.Buffer
	err = run(ctx, []string{"-cublas", path, "-modes", "sweep", "-duration", "300ms", "-sweep-sms", "8,rest",
		"-sweep-no-sm-target", "8", "-sweep-repeats", "1", "-json", js}, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		size string
		hint bool
	}{{"whole", true}, {"8", true}, {"rest", true}, {"8", false}}
	if len(rep.Sweep) != len(want) || len(rep.SweepSummary) != len(want) {
		t.Fatalf("%d rows, %d summaries; want %d", len(rep.Sweep), len(rep.SweepSummary), len(want))
	}
	for i, r := range rep.Sweep {
		if r.Size != want[i].size || r.SmTarget != want[i].hint || r.Repeat != 1 {
			t.Errorf("row %d: %s hint %v repeat %d, want %s hint %v", i, r.Size, r.SmTarget, r.Repeat, want[i].size, want[i].hint)
		}
		if r.Samples < 1 || r.SMClockMHz <= 0 || r.PowerW <= 0 || r.PowerLimitW <= 0 || r.TFLOPs <= 0 || r.RatioLinear <= 0 || r.RatioClock <= 0 || r.Note != "" {
			t.Errorf("row %d (%s): %+v", i, r.Size, r)
		}
	}
}
