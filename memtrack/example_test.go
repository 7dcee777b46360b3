package memtrack_test

import (
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/memtrack"
)

func Example() {
	const miB = 1 << 20
	dev, _ := memtrack.New(80 * miB) // the device's quota
	infer, _ := dev.NewAccount("inference", 60*miB)
	batch, _ := dev.NewAccount("batch", 60*miB)

	// cuMemAlloc for the inference tenant: admit, allocate, commit.
	r, err := infer.Reserve(50 * miB)
	if err != nil {
		panic(err)
	}
	const ptr = 0x7f0000000000 // what the driver returned
	if err := r.Commit(ptr); err != nil {
		panic(err)
	}

	// The batch tenant fits its own limit but not the device.
	_, err = batch.Reserve(40 * miB)
	fmt.Println(errors.Is(err, memtrack.ErrQuotaExceeded))
	fmt.Printf("%s: %v\n", batch.Name(), err) // an Account's errors leave its name to the caller

	// What cuMemGetInfo reports to each tenant on an otherwise idle GPU.
	free, total := infer.MemInfo(30*miB, 141*1024*miB)
	fmt.Printf("inference: %d MiB free of %d MiB\n", free/miB, total/miB)

	// cuMemFree.
	n, _ := infer.Release(ptr)
	fmt.Printf("freed %d MiB, device used %d\n", n/miB, dev.Used())
	// Output:
	// true
	// batch: requested 41943040 bytes with 52428800 of 83886080 bytes used would exceed the device limit (at most 31457280 more bytes available)
	// inference: 10 MiB free of 60 MiB
	// freed 50 MiB, device used 0
}
