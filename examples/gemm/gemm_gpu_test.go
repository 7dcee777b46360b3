package main

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/internal/cublas"
	"github.com/fcsp-go/fcsp-go/examples/internal/gemmjob"
	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// TestGPUCublasInDoBesideSDKCalls: cuBLAS GEMMs inside Do on one goroutine
// while others allocate, free, launch and make streams on the same
// partitioned tenant, for 10 s (GEMM_STORM=2s to shorten): no error, every
// GEMM's result right.
func TestGPUCublasInDoBesideSDKCalls(t *testing.T) {
	ctx := context.Background()
	pool, _ := openWithCublas(t)
	var err error
	d := 10 * time.Second
	if s := os.Getenv("GEMM_STORM"); s != "" {
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	tn, err := pool.NewTenant("storm", fcsp.WithSMs(16), fcsp.WithMemoryPool(0), fcsp.WithMemoryQuota(8<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	w, err := gemmjob.New(ctx, tn, interM, interN, interK)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := tn.LoadModule(kernels.ChainPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("chain")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	counts := make([]int, 4)
	wg.Go(func() { // cuBLAS in Do, each result checked
		for time.Now().Before(end) {
			if err := errors.Join(w.Run(ctx), w.Check()); err != nil {
				errs[0] = err
				return
			}
			counts[0]++
		}
	})
	wg.Go(func() { // allocate and free
		for time.Now().Before(end) {
			p, err := tn.Alloc(ctx, 1<<20)
			if err == nil {
				err = tn.Free(p)
			}
			if err != nil {
				errs[1] = err
				return
			}
			counts[1]++
		}
	})
	wg.Go(func() { // launch on a stream of its own, checked
		s, err := tn.NewStream(fcsp.ClassDefault)
		if err != nil {
			errs[2] = err
			return
		}
		defer s.Close()
		const n, steps = 4096, 10
		buf, err := tn.AllocAsync(s, 4*n)
		if err != nil {
			errs[2] = err
			return
		}
		defer tn.FreeAsync(s, buf)
		out := make([]byte, 4*n)
		var args fcsp.Args
		args.Ptr(buf).Int32(n).Int32(steps)
		for time.Now().Before(end) {
			err := errors.Join(s.Launch(ctx, fn, fcsp.Dim3{X: n / 256, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &args), s.Synchronize())
			if err == nil {
				err = tn.CopyFromDevice(out, buf)
			}
			if err == nil {
				err = kernels.CheckChain(out, steps)
			}
			if err != nil {
				errs[2] = err
				return
			}
			counts[2]++
		}
	})
	wg.Go(func() { // streams made and closed
		for time.Now().Before(end) {
			s, err := tn.NewStream(fcsp.ClassDefault)
			if err == nil {
				err = s.Close()
			}
			if err != nil {
				errs[3] = err
				return
			}
			counts[3]++
		}
	})
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(w.Check(), w.Close(ctx)); err != nil {
		t.Fatal(err)
	}
	t.Logf("in %v: %d checked GEMMs in Do, %d alloc+free, %d checked launches, %d streams", d, counts[0], counts[1], counts[2], counts[3])
	for i, c := range counts {
		if c == 0 {
			t.Errorf("goroutine %d did nothing", i)
		}
	}
	if used := tn.Stats().MemoryUsed; used != 0 {
		t.Errorf("%d bytes still counted", used)
	}
}

// openWithCublas opens device 0 (closed when the test ends) and loads
// cuBLAS from GEMM_CUBLAS or the toolkit's path, which it returns; the test
// is skipped where either is missing.
func openWithCublas(t *testing.T) (*fcsp.Pool, string) {
	t.Helper()
	pool, err := fcsp.Open(context.Background(), 0)
	if errors.Is(err, fcsp.ErrNoDriver) {
		t.Skipf("no NVIDIA driver on this machine (%v): GPU test skipped", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	path := os.Getenv("GEMM_CUBLAS")
	if path == "" {
		path = "/usr/local/cuda/lib64/libcublas.so.13"
	}
	if err := cublas.Load(path); err != nil {
		t.Skipf("no cuBLAS (%v): GPU test skipped", err)
	}
	return pool, path
}
