package fcsp_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// A request's kernel writes through a bad pointer: every tenant of the
// process then gets ErrDeviceLost, and Health says the process must be
// restarted (RestartRequired), since the driver keeps the fault.
func ExamplePool_Health() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	interactive, _ := pool.NewTenant("interactive", fcsp.WithSMs(16))
	batch, _ := pool.NewTenant("batch", fcsp.WithSMs(16))
	mod, _ := batch.LoadModule(kernels.ChainPTX)
	chain, _ := mod.Function("chain")

	var args fcsp.Args
	args.Ptr(0x10).Int32(256).Int32(1) // no allocation there
	err = batch.Stream().Launch(ctx, chain, fcsp.Dim3{X: 1, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &args)
	if err == nil {
		err = batch.Stream().Synchronize() // on a GPU the fault shows here
	}
	var lost *fcsp.DeviceLostError
	if errors.As(err, &lost) {
		fmt.Printf("lost: %s, first seen by %q\n", lost.Err.Code.Name(), lost.Tenant)
	}
	_, err = interactive.Alloc(ctx, 1<<20)
	fmt.Println("neighbour lost too:", errors.Is(err, fcsp.ErrDeviceLost))

	// As on the H200, the driver keeps a sticky fault until the process
	// exits: the way back is a new process (a failing liveness probe).
	fmt.Println("restart required:", pool.Health().RestartRequired)
	_, err = interactive.Alloc(ctx, 1<<20)
	fmt.Println("still lost:", errors.Is(err, fcsp.ErrDeviceLost))
	// Output:
	// lost: CUDA_ERROR_ILLEGAL_ADDRESS, first seen by "batch"
	// neighbour lost too: true
	// restart required: true
	// still lost: true
}
