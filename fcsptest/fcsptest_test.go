package fcsptest_test

import (
	"context"
	"testing"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/kernels"
)

func TestSimulatorRunsTheChain(t *testing.T) {
	ctx := context.Background()
	opt := fcsptest.Simulator(fcsptest.T4().WithMemory(1 << 30))
	p, err := fcsp.Open(ctx, 0, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if d := p.Device(); !d.Simulated || d.SMs != 40 || d.TotalMemory != 1<<30 {
		t.Fatalf("device %v", d)
	}
	// One option, two pools: each Open gets a device of its own.
	q, err := fcsp.Open(ctx, 0, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	tn, err := p.NewTenant("a", fcsp.WithSMs(20))
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	if q.Stats().FreeSMs != 40 {
		t.Fatalf("a tenant of one pool took SMs of the other: %d free", q.Stats().FreeSMs)
	}
	const n, steps = 512, 64
	buf, err := tn.Alloc(ctx, 4*n)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := tn.LoadModule(kernels.ChainPTX)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("chain")
	if err != nil {
		t.Fatal(err)
	}
	var args fcsp.Args
	args.Ptr(buf).Int32(n).Int32(steps)
	if err := tn.Stream().Launch(ctx, fn, fcsp.Dim3{X: 2, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &args); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*n)
	if err := tn.CopyFromDevice(out, buf); err != nil {
		t.Fatal(err)
	}
	if err := kernels.CheckChain(out, steps); err != nil {
		t.Fatal(err)
	}
}
