package fcsp_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	// The sample kernel; public as github.com/fcsp-go/fcsp-go/kernels once
	// that move is merged.
	"github.com/fcsp-go/fcsp-go/kernels"
)

// A first kernel: load the sample PTX into a tenant, launch its "chain"
// entry on the tenant's stream, and read the result back. This is the
// README's snippet; it runs on a GPU the same way (fcsp.Open(ctx, 0)).
func ExampleStream_Launch() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	t, err := pool.NewTenant("interactive", fcsp.WithSMs(16), fcsp.WithMemoryQuota(8<<30))
	if err != nil {
		panic(err)
	}
	mod, err := t.LoadModule(kernels.ChainPTX)
	if err != nil {
		panic(err)
	}
	fn, err := mod.Function("chain") // chain(float *x, int n, int steps)
	if err != nil {
		panic(err)
	}
	const n, steps = 1024, 100
	buf, err := t.Alloc(ctx, 4*n)
	if err != nil {
		panic(err)
	}
	defer t.Free(buf)
	var args fcsp.Args
	args.Ptr(buf).Int32(n).Int32(steps)
	grid, block := fcsp.Dim3{X: n / 256, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}
	if err := t.Stream().Launch(ctx, fn, grid, block, 0, &args); err != nil {
		panic(err)
	}
	if err := t.Stream().Synchronize(); err != nil {
		panic(err)
	}
	out := make([]byte, 4*n)
	if err := t.CopyFromDevice(out, buf); err != nil {
		panic(err)
	}
	fmt.Println("chain checked:", kernels.CheckChain(out, steps) == nil)
	// Output: chain checked: true
}

// A request-sized arena: what the function allocates and does not free is
// freed when it returns, fails or panics.
func ExampleTenant_Scope() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	t, err := pool.NewTenant("requests", fcsp.WithMemoryQuota(1<<30))
	if err != nil {
		panic(err)
	}
	err = t.Scope(ctx, func(s *fcsp.Scope) error {
		if _, err := s.Alloc(256 << 20); err != nil {
			return err
		}
		fmt.Println("in the scope:", t.Stats().MemoryUsed>>20, "MiB")
		return errors.New("the handler failed half-way")
	})
	fmt.Println(err)
	fmt.Println("after it:", t.Stats().MemoryUsed, "bytes")
	// Output:
	// in the scope: 256 MiB
	// the handler failed half-way
	// after it: 0 bytes
}

// In a pod where HAMi's device plugin set the limits, the pool reads them
// from the environment: here 4 GiB of memory and 25% of the SMs' launch
// rate for every tenant.
func ExampleWithEnviron() {
	ctx := context.Background()
	env := []string{"CUDA_DEVICE_MEMORY_LIMIT=4g", "CUDA_DEVICE_SM_LIMIT=25"} // os.Environ() in a real pod
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200(), fcsp.WithEnviron(env))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	fmt.Println("memory limit:", pool.MemoryLimit()>>30, "GiB")
	t, err := pool.NewTenant("serving")
	if err != nil {
		panic(err)
	}
	fmt.Println("launch-rate limit:", t.Stats().SMLimit)
	_, err = pool.NewTenant("greedy", fcsp.WithMemoryQuota(32<<30))
	fmt.Println(errors.Is(err, fcsp.ErrInvalidArgument))
	// Output:
	// memory limit: 4 GiB
	// launch-rate limit: 0.25
	// true
}

// Pool.Stats is one snapshot of the device, its memory and every tenant
// (fcspprom exports it to Prometheus).
func ExamplePool_Stats() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	a, _ := pool.NewTenant("interactive", fcsp.WithSMs(16), fcsp.WithMemoryQuota(8<<30))
	pool.NewTenant("batch", fcsp.WithRestOfSMs(), fcsp.WithSMLimit(0.5))
	a.Alloc(ctx, 1<<30)
	for _, s := range pool.Stats().Tenants {
		fmt.Printf("%-11s %3d SMs  %d/%d GiB  limit %.2f  waited %v\n",
			s.Name, s.SMs, s.MemoryUsed>>30, s.MemoryLimit>>30, s.SMLimit, s.ThrottleWait)
	}
	t, ok := pool.Tenant("interactive")
	fmt.Println(ok, t == a)
	// Output:
	// batch       116 SMs  0/140 GiB  limit 0.50  waited 0s
	// interactive  16 SMs  1/8 GiB  limit 0.00  waited 0s
	// true true
}

// A driver failure is a *fcsp.CUDAError: the entry point and its CUresult.
func ExampleCUDAError() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	t, err := pool.NewTenant("t")
	if err != nil {
		panic(err)
	}
	_, err = t.LoadModule([]byte("not PTX"))
	var cerr *fcsp.CUDAError
	if errors.As(err, &cerr) {
		fmt.Println(cerr.Op, int(cerr.Code))
	}
	// Output: cuModuleLoadData 200
}
