package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// GEMM shapes: decode-like and prefill-like.
const (
	interM, interN, interK = 64, 4096, 4096
	batchN                 = 8192
)

// mode says how the two tenants are made; sms 0 is unpartitioned, -1 the
// rest of the device; batch false runs the interactive tenant alone.
type mode struct {
	interSMs, batchSMs int
	batch              bool
	doc                string
}

var modeTable = map[string]mode{
	"whole":  {0, 0, false, "interactive alone on the whole device"},
	"alone":  {16, 0, false, "interactive alone on its 16-SM partition"},
	"shared": {0, 0, true, "both unpartitioned"},
	"part16": {16, -1, true, "16 SMs + the rest"},
	"part8":  {8, -1, true, "8 SMs + the rest"},
	"sweep":  {},
}

// Result is one mode's figures.
type Result struct {
	Mode        string  `json:"mode"`
	What        string  `json:"what"`
	InterSMs    int     `json:"interactive_sms"`
	BatchSMs    int     `json:"batch_sms,omitempty"`
	Calls       int     `json:"interactive_calls"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	MaxUs       float64 `json:"max_us"`
	BatchGEMMs  int     `json:"batch_gemms,omitempty"`
	BatchTFLOPs float64 `json:"batch_tflops,omitempty"`
	Round       int     `json:"round,omitempty"` // 1-based, with -rounds
}

func (r Result) String() string {
	s := fmt.Sprintf("%-7s %-40s interactive %3d SMs: P50 %6.1f us  P99 %6.1f us  max %7.1f us (%d calls)",
		r.Mode, r.What, r.InterSMs, r.P50us, r.P99us, r.MaxUs, r.Calls)
	if r.BatchGEMMs > 0 {
		s += fmt.Sprintf("   batch %3d SMs: %6.1f TFLOP/s", r.BatchSMs, r.BatchTFLOPs)
	}
	return s
}

func tenantOpts(sms int) []fcsp.TenantOption {
	switch {
	case sms > 0:
		return []fcsp.TenantOption{fcsp.WithSMs(sms)}
	case sms < 0:
		return []fcsp.TenantOption{fcsp.WithRestOfSMs()}
	}
	return nil
}

func runMode(ctx context.Context, pool *fcsp.Pool, name string, d time.Duration) (Result, error) {
	m := modeTable[name]
	r := Result{Mode: name, What: m.doc}
	inter, err := pool.NewTenant("interactive", tenantOpts(m.interSMs)...)
	if err != nil {
		return r, err
	}
	defer inter.Close()
	r.InterSMs = inter.SMs()
	iw, err := gemmjob.New(ctx, inter, interM, interN, interK)
	if err != nil {
		return r, err
	}
	defer iw.Close(ctx)
	var bw *gemmjob.Job
	if m.batch {
		batch, err := pool.NewTenant("batch", tenantOpts(m.batchSMs)...)
		if err != nil {
			return r, err
		}
		defer batch.Close()
		r.BatchSMs = batch.SMs()
		if bw, err = gemmjob.New(ctx, batch, batchN, batchN, batchN); err != nil {
			return r, err
		}
		defer bw.Close(ctx)
	}
	// Warm up (cuBLAS picks and loads its kernels on first use).
	for _, w := range []*gemmjob.Job{iw, bw} {
		if w != nil {
			if err := errors.Join(w.Run(ctx), w.Check()); err != nil {
				return r, err
			}
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var batchErr error
	var gemms int
	var batchTime time.Duration
	if bw != nil {
		wg.Go(func() { gemms, batchTime, batchErr = batchLoop(ctx, bw, stop) })
	}
	lat, err := latencyLoop(ctx, iw, d)
	close(stop)
	wg.Wait()
	if err = errors.Join(err, batchErr, iw.Check()); err != nil {
		return r, err
	}
	if bw != nil {
		if err := bw.Check(); err != nil {
			return r, err
		}
		r.BatchGEMMs = gemms
		r.BatchTFLOPs = tflops(gemms, batchTime)
	}
	r.Calls = len(lat)
	r.P50us, r.P99us, r.MaxUs = pct(lat, 0.50), pct(lat, 0.99), pct(lat, 1)
	return r, nil
}

// latencyLoop times GEMM + synchronise, one at a time, for d.
func latencyLoop(ctx context.Context, w *gemmjob.Job, d time.Duration) ([]float64, error) {
	var lat []float64
	for end := time.Now().Add(d); time.Now().Before(end); {
		t0 := time.Now()
		if err := w.Run(ctx); err != nil {
			return lat, err
		}
		if err := w.T.Stream().Synchronize(); err != nil {
			return lat, err
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	return lat, nil
}

// batchLoop queues GEMMs back to back (two in flight) until stop.
func batchLoop(ctx context.Context, w *gemmjob.Job, stop <-chan struct{}) (int, time.Duration, error) {
	start := time.Now()
	n := 0
	for {
		select {
		case <-stop:
			err := w.T.Stream().Synchronize()
			return n, time.Since(start), err
		default:
		}
		if err := errors.Join(w.Run(ctx), w.Run(ctx), w.T.Stream().Synchronize()); err != nil {
			return n, time.Since(start), err
		}
		n += 2
	}
}

// batchFor is batchLoop stopped after d.
func batchFor(ctx context.Context, w *gemmjob.Job, d time.Duration) (int, time.Duration, error) {
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	return batchLoop(ctx, w, stop)
}

func tflops(gemms int, d time.Duration) float64 {
	return float64(gemms) * 2 * batchN * batchN * batchN / d.Seconds() / 1e12
}

func pct(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// runMPSRole runs one side on an unpartitioned tenant (the plain device,
// where MPS's active-thread percentage applies) and prints one JSON line.
func runMPSRole(ctx context.Context, pool *fcsp.Pool, cfg config, out io.Writer) error {
	t, err := pool.NewTenant("mps-" + cfg.mpsRole)
	if err != nil {
		return err
	}
	defer t.Close()
	r := Result{Mode: "mps-" + cfg.mpsRole, What: "one process under MPS", InterSMs: t.SMs()}
	if cfg.mpsRole == "interactive" {
		w, err := gemmjob.New(ctx, t, interM, interN, interK)
		if err != nil {
			return err
		}
		defer w.Close(ctx)
		if err := errors.Join(w.Run(ctx), w.Check()); err != nil {
			return err
		}
		lat, err := latencyLoop(ctx, w, cfg.duration)
		if err = errors.Join(err, w.Check()); err != nil {
			return err
		}
		r.Calls = len(lat)
		r.P50us, r.P99us, r.MaxUs = pct(lat, 0.50), pct(lat, 0.99), pct(lat, 1)
	} else {
		w, err := gemmjob.New(ctx, t, batchN, batchN, batchN)
		if err != nil {
			return err
		}
		defer w.Close(ctx)
		if err := errors.Join(w.Run(ctx), w.Check()); err != nil {
			return err
		}
		n, el, err := batchFor(ctx, w, cfg.duration)
		if err = errors.Join(err, w.Check()); err != nil {
			return err
		}
		r.BatchSMs, r.BatchGEMMs, r.BatchTFLOPs = t.SMs(), n, tflops(n, el)
	}
	b, _ := json.Marshal(r)
	fmt.Fprintln(out, string(b))
	return nil
}
