package fcsp_test

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// A latency tenant and a neighbour that yields to it: while the latency
// tenant's triad is on the GPU the neighbour is admitted at a quarter of
// its share (here 1: free otherwise); the latency tenant's Synchronize
// sees its work done and lifts the floor. Its declared bytes give its
// achieved bandwidth.
func ExampleWithBandwidthFloor() {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	lat, err := pool.NewTenant("latency", fcsp.WithSMs(16), fcsp.WithPriority(fcsp.LatencyCritical))
	if err != nil {
		panic(err)
	}
	batch, err := pool.NewTenant("batch", fcsp.WithRestOfSMs(), fcsp.WithBandwidthFloor(0.25))
	if err != nil {
		panic(err)
	}
	mod, err := lat.LoadModule(kernels.TriadPTX)
	if err != nil {
		panic(err)
	}
	triad, err := mod.Function("triad")
	if err != nil {
		panic(err)
	}
	const n = 1 << 12
	triad.SetBytesMoved(kernels.TriadBytes(n)) // 12 bytes per element
	var bufs [3]fcsp.DevicePtr
	for i := range bufs {
		if bufs[i], err = lat.Alloc(ctx, 4*n); err != nil {
			panic(err)
		}
	}
	var args fcsp.Args
	args.Ptr(bufs[0]).Ptr(bufs[1]).Ptr(bufs[2]).Float32(2).Uint32(n)
	if err := lat.Stream().Launch(ctx, triad, fcsp.Dim3{X: 128, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &args); err != nil {
		panic(err)
	}
	fmt.Println("latency tenant busy:", pool.Stats().LatencyBusy)
	if err := lat.Stream().Synchronize(); err != nil {
		panic(err)
	}
	fmt.Println("latency tenant busy:", pool.Stats().LatencyBusy)
	bs := batch.Stats()
	fmt.Println("batch: share", bs.GPUShare, "floor", bs.Bandwidth.Floor)
	fmt.Println("latency:", lat.Stats().Bandwidth.BytesMoved, "bytes moved,", lat.Stats().Bandwidth.Priority)
	// Output:
	// latency tenant busy: true
	// latency tenant busy: false
	// batch: share 1 floor 0.25
	// latency: 49152 bytes moved, latency-critical
}
