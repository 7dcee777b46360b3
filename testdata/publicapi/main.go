// Command publicapi calls every public package of fcsp-go from outside its
// module. It is built, not run, by .ci/run.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
	"github.com/fcsp-go/fcsp-go/greenctx"
	"github.com/fcsp-go/fcsp-go/kernels"
	"github.com/fcsp-go/fcsp-go/memtrack"
	"github.com/fcsp-go/fcsp-go/stream"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// share is a process-local memtrack.SharedDevice.
type share struct{ mine, all uint64 }

func (s *share) Add(n uint64) error { s.mine += n; s.all += n; return nil }
func (s *share) Sub(n uint64) error { s.mine -= n; s.all -= n; return nil }
func (s *share) Used() uint64       { return s.all }

func main() {
	ctx := context.Background()

	tr, err := memtrack.New(1<<30, memtrack.WithShared(&share{}))
	check(err)
	acct, err := tr.NewAccount("a", 1<<20)
	check(err)
	r, err := acct.Reserve(4096)
	check(err)
	check(r.Commit(0x1000))
	pr, err := acct.StartRelease(0x1000)
	check(err)
	pr.Commit()

	lim, err := tokenbucket.New(tokenbucket.Config{SMs: 8, ThreadsPerSM: 2048, SMLimit: 0.5})
	check(err)
	_ = lim.Cost([3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, stream.Attention)

	pool, err := fcsp.Open(ctx, 0)
	if errors.Is(err, fcsp.ErrNoDriver) {
		pool, err = fcsp.Open(ctx, 0, fcsptest.Simulator(fcsptest.H200().WithMemory(8<<30)))
	}
	check(err)
	defer pool.Close()
	t, err := pool.NewTenant("interactive", fcsp.WithSMs(16), fcsp.WithMemoryQuota(1<<30))
	check(err)
	defer t.Close()
	const n, steps = 1024, 100
	buf, err := t.Alloc(ctx, 4*n)
	check(err)
	mod, err := t.LoadModule(kernels.ChainPTX)
	check(err)
	fn, err := mod.Function("chain")
	check(err)
	var args fcsp.Args
	args.Ptr(buf).Int32(n).Int32(steps)
	check(t.Stream().Launch(ctx, fn, fcsp.Dim3{X: n / 256, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &args))
	check(t.Stream().Synchronize())
	out := make([]byte, 4*n)
	check(t.CopyFromDevice(out, buf))
	check(kernels.CheckChain(out, steps))
	check(t.Free(buf))
	fmt.Println(pool.Device(), "chain ok")

	// Partitions without tenants.
	dev, err := greenctx.Open(0)
	if errors.Is(err, greenctx.ErrNoDriver) {
		dev, err = fcsptest.GreenDevice(fcsptest.H200())
	}
	check(err)
	defer dev.Close()
	_, rows, err := dev.Table(8, 16)
	check(err)
	split, err := dev.Split(rows[0].MinCount)
	check(err)
	defer split.Close()
	part, err := split.Take(2 * split.GroupSMs())
	check(err)
	var _ io.Closer = part
	var stream, cuctx uintptr = part.Stream(), part.Context()
	_, err = split.Take(split.GroupSMs() + 1)
	if !errors.Is(err, greenctx.ErrGranularity) {
		check(fmt.Errorf("want ErrGranularity, got %v", err))
	}
	fmt.Println(dev, "partition of", part.SMs(), "SMs", stream != 0 && cuctx != 0)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
