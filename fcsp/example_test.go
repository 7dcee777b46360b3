package fcsp_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

func Example() {
	ctx := context.Background()
	// On a machine without a GPU, run on the simulated H200.
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
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
	// batch 116 SMs
	// true
	// true
}

// A request class that allocates constantly (KV-cache blocks) gets a
// memory pool; each request allocates in order on a stream of its own and
// closes it when done. A block freed on a stream is reused by the next
// allocation of its size on that stream without calling the driver.
func ExampleWithMemoryPool() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	kv, err := pool.NewTenant("kv", fcsp.WithSMs(16), fcsp.WithMemoryQuota(8<<30), fcsp.WithMemoryPool(0))
	if err != nil {
		panic(err)
	}
	defer kv.Close()

	req, err := kv.NewStream(fcsp.ClassAttention)
	if err != nil {
		panic(err)
	}
	first, _ := kv.AllocAsync(req, 2<<20)
	_ = kv.FreeAsync(req, first)
	again, _ := kv.AllocAsync(req, 2<<20) // the same block, no driver call
	fmt.Println(again == first, kv.Stats().MemoryUsed)
	_ = kv.FreeAsync(req, again)
	fmt.Println(kv.Stats().MemoryCached)
	_ = req.Close() // the request is done: its cached blocks return to the pool
	fmt.Println(kv.Stats().MemoryCached, kv.Stats().Streams)
	// Output:
	// true 2097152
	// 2097152
	// 0 1
}
