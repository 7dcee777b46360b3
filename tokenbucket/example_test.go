package tokenbucket_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

func Example() {
	// A fake clock makes the example deterministic; production code leaves
	// Clock nil.
	var now int64
	clock := func() int64 { return now }

	// A tenant limited to half of an H200.
	lim, err := tokenbucket.New(tokenbucket.Config{
		SMs:          132,
		ThreadsPerSM: 2048,
		SMLimit:      0.5,
		Clock:        clock,
	})
	if err != nil {
		panic(err)
	}
	s, err := lim.NewStream(0.5) // this stream may use half of the tenant's budget
	if err != nil {
		panic(err)
	}
	defer s.Close()

	grid, block := [3]uint32{64, 1, 1}, [3]uint32{256, 1, 1}
	fmt.Printf("device: %.0f tokens, %.0f tokens/ms\n", lim.Capacity(), lim.Rate()/1000)
	fmt.Printf("cost: default %.1f, attention %.1f, nccl %.0f\n",
		lim.Cost(grid, block, stream.Default),
		lim.Cost(grid, block, stream.Attention),
		lim.Cost(grid, block, stream.NCCL))

	cost := lim.Cost(grid, block, stream.Default)
	launched := 0
	for s.TryAcquire(cost) {
		launched++
	}
	fmt.Println("launched from a full bucket:", launched)

	now += int64(time.Millisecond) // the stream refills 67584 tokens per ms
	if err := s.Wait(context.Background(), cost); err != nil {
		panic(err)
	}
	fmt.Printf("after 1ms: %+v\n", s.Stats())
	// Output:
	// device: 270336 tokens, 135168 tokens/ms
	// cost: default 22118.4, attention 17694.7, nccl 0
	// launched from a full bucket: 6
	// after 1ms: {Admitted:7 Rejected:1 Throttled:0 WaitNanos:0}
}
