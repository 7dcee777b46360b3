package greenctx_test

import (
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
)

// Split the device in groups of at least 16 SMs, take two groups as one
// partition for a latency-sensitive tenant, and the other groups for
// everything else (the 4 SMs left over by the split stay unused). On a GPU, pass cuda.Load()'s driver instead of the fake.
func ExampleDevice_Split() {
	dev, err := greenctx.Open(fake.New(fake.H200()), 0)
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	row, _ := dev.Predict(16)
	fmt.Printf("at least 16 SMs: %d groups of %d, %d left over\n", row.Groups, row.GroupSMs, row.Remainder)
	split, err := dev.Split(16)
	if err != nil {
		panic(err)
	}
	fast, err := split.Take(32)
	if err != nil {
		panic(err)
	}
	defer fast.Close()
	rest, err := split.TakeRest()
	if err != nil {
		panic(err)
	}
	defer rest.Close()
	fmt.Println(fast)
	fmt.Println(rest)
	fmt.Println("12 SMs:", split.Check(12))
	// Output:
	// at least 16 SMs: 8 groups of 16, 4 left over
	// green context with 32 SMs
	// green context with 100 SMs
	// 12 SMs: greenctx: SM count does not fit the device's split granularity: asked for 12 SMs; this device splits in groups of 16 (try 16)
}
