package fcsp_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

func Example() {
	ctx := context.Background()
	// On a machine without a GPU, run on the simulated H200.
	pool, err := fcsp.Open(ctx, 0, fcsp.WithSimulator(fcsp.SimulatedH200()))
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	interactive, err := pool.NewTenant("interactive", fcsp.WithSMs(16), fcsp.WithMemoryQuota(1<<30))
	if err != nil {
		panic(err)
	}
	batch, err := pool.NewTenant("batch", fcsp.WithRestOfSMs(), fcsp.WithSMLimit(0.5))
	if err != nil {
		panic(err)
	}
	fmt.Println(interactive.Name(), interactive.SMs(), "SMs")
	fmt.Println(batch.Name(), batch.SMs(), "SMs")

	_, err = pool.NewTenant("odd", fcsp.WithSMs(12))
	fmt.Println(errors.Is(err, fcsp.ErrGranularity))

	_, err = interactive.Alloc(ctx, 2<<30)
	fmt.Println(errors.Is(err, fcsp.ErrQuotaExceeded))
	// Output:
	// interactive 16 SMs
	// batch 104 SMs
	// true
	// true
}
