package greenctx_test

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/greenctx"
)

// Split the device in groups of at least 16 SMs, take two groups as one
// partition for latency-sensitive work and the other groups, with the SMs
// the cut leaves over, for everything else. On a GPU, open it with
// greenctx.Open(0) instead of the simulator.
func ExampleDevice_Split() {
	dev, err := fcsptest.GreenDevice(fcsptest.H200())
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
	defer split.Close()
	fast, err := split.Take(32)
	if err != nil {
		panic(err)
	}
	rest, err := split.TakeRest()
	if err != nil {
		panic(err)
	}
	fmt.Println(fast)
	fmt.Println(rest)
	fmt.Println("free:", split.FreeSMs())
	fmt.Println("12 SMs:", split.Check(12))
	// Output:
	// at least 16 SMs: 8 groups of 16, 4 left over
	// green context with 32 SMs
	// green context with 100 SMs
	// free: 0
	// 12 SMs: unsupported SM count: asked for 12 SMs; this device splits in groups of 16 (try 16)
}

// The driver's split table: what a cut at each minimum count makes. The
// H200 caps co-scheduled groups, so a cut by 8 makes 15 groups, not 16.
func ExampleDevice_Table() {
	dev, err := fcsptest.GreenDevice(fcsptest.H200())
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	_, rows, err := dev.Table(8, 16, 64)
	if err != nil {
		panic(err)
	}
	fmt.Println("min  groups  SMs/group  left over")
	for _, r := range rows {
		fmt.Printf("%3d  %6d  %9d  %9d\n", r.MinCount, r.Groups, r.GroupSMs, r.Remainder)
	}
	// Output:
	// min  groups  SMs/group  left over
	//   8      15          8         12
	//  16       8         16          4
	//  64       2         64          4
}

// Bad SM counts are refused with an error that says what would fit.
func ExampleSplit_Take() {
	dev, err := fcsptest.GreenDevice(fcsptest.H200())
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	split, err := dev.Split(8)
	if err != nil {
		panic(err)
	}
	defer split.Close()
	_, err = split.Take(12)
	fmt.Println(errors.Is(err, greenctx.ErrGranularity), err)
	_, err = split.Take(128)
	fmt.Println(errors.Is(err, greenctx.ErrInsufficientSMs), err)
	// Output:
	// true unsupported SM count: asked for 12 SMs; this device splits in groups of 8 (try 8 or 16)
	// true not enough free SMs: asked for 128 SMs; 120 of 120 partitionable SMs are free (groups of 8, 12 SMs left over by the split)
}
