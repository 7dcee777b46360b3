package fcsp_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// A server warms each context its requests' Dos may hold before it
// serves: here a library's first call (cuBLAS would load its kernels in
// that context, a load that waits for the whole device) runs once in each
// of the tenant's four.
func ExampleTenant_DoEach() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	t, err := pool.NewTenant("interactive", fcsp.WithSMs(16), fcsp.WithConcurrentDos(4))
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	seen := map[uintptr]bool{}
	err = t.DoEach(ctx, func(cur fcsp.Current) error {
		mu.Lock()
		defer mu.Unlock()
		seen[uintptr(cur.Context().Pointer())] = true // the library's first call would go here
		return nil
	})
	fmt.Println(len(seen), "contexts warmed", err)
	// Output: 4 contexts warmed <nil>
}

// A tenant gives the SDK its warm-up: a library's first call (here only
// counted) runs in every context of every size the tenant may take,
// before NewTenant returns, so no request is the first in a context.
func ExampleWithWarmup() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	var mu sync.Mutex
	warmed := map[int]int{} // contexts warmed, by their SMs
	t, err := pool.NewTenant("interactive", fcsp.WithSMs(16), fcsp.WithReshapeSizes(32), fcsp.WithConcurrentDos(2),
		fcsp.WithWarmup(func(cur fcsp.Current) error {
			mu.Lock()
			defer mu.Unlock()
			warmed[cur.SMs()]++ // cublasCreate, cublasSetSmCountTarget(cur.SMs()), a first GEMM would go here
			return nil
		}))
	if err != nil {
		panic(err)
	}
	defer t.Close()
	fmt.Println("contexts warmed by size:", warmed)
	// Output: contexts warmed by size: map[16:2 32:2]
}

// A pool whose Synchronize always polls from Go, yielding after 20 µs,
// for a host where request goroutines outnumber cores.
func ExampleWithHostWait() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200(), fcsp.WithHostWait(20*time.Microsecond))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	t, err := pool.NewTenant("t")
	if err != nil {
		panic(err)
	}
	fmt.Println(t.Stream().Synchronize())
	// Output: <nil>
}
