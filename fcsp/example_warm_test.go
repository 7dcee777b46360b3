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
