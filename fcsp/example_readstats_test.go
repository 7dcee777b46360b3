package fcsp_test

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

// A loop that polls the pool (an autoscaler, a load shedder) keeps one
// PoolStats and reads into it: no garbage per read.
func ExamplePool_ReadStats() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	a, _ := pool.NewTenant("interactive", fcsp.WithSMs(16), fcsp.WithMemoryQuota(8<<30))
	pool.NewTenant("batch", fcsp.WithRestOfSMs())
	var s fcsp.PoolStats
	for _, n := range []uint64{1 << 30, 2 << 30} {
		p, _ := a.Alloc(ctx, n)
		pool.ReadStats(&s) // reuses s.Tenants
		fmt.Printf("%d tenants, %s uses %d GiB\n", len(s.Tenants), s.Tenants[1].Name, s.Tenants[1].MemoryUsed>>30)
		a.Free(p)
	}
	// Output:
	// 2 tenants, interactive uses 1 GiB
	// 2 tenants, interactive uses 2 GiB
}
