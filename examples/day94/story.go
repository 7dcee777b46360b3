package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fcsp-go/fcsp-go/examples/workload"
	"github.com/fcsp-go/fcsp-go/fcsp"
)

// story shows the SDK's promises on any pool, simulated or real: tenants
// made with SMs of their own, a memory quota refusing an allocation, and a
// launch-rate limit making launches wait. Every figure it prints is
// computed by the SDK's own accounting, so it holds on the simulator too.
func story(ctx context.Context, w io.Writer, pool *fcsp.Pool) error {
	dev := pool.Device()
	fmt.Fprintf(w, "Part 0: tenants on %s (%d SMs, split in groups of %d)\n", dev.Name, dev.SMs, dev.Granularity)
	unit := pool.Device().PartitionUnit
	inter, err := pool.NewTenant("interactive", fcsp.WithSMs(unit), fcsp.WithMemoryQuota(64<<20))
	if err != nil {
		return err
	}
	defer inter.Close()
	batch, err := pool.NewTenant("batch", fcsp.WithRestOfSMs(), fcsp.WithSMLimit(0.25))
	if err != nil {
		return err
	}
	defer batch.Close()
	fmt.Fprintf(w, "  tenant %-12q %3d SMs of its own (a green context), memory quota 64 MiB\n", inter.Name(), inter.SMs())
	fmt.Fprintf(w, "  tenant %-12q %3d SMs of its own (the rest), launch rate limited to 25%%\n", batch.Name(), batch.SMs())

	buf, err := inter.Alloc(ctx, 48<<20)
	if err != nil {
		return err
	}
	_, err = inter.Alloc(ctx, 32<<20)
	if !errors.Is(err, fcsp.ErrQuotaExceeded) {
		return fmt.Errorf("32 MiB over a 64 MiB quota with 48 MiB held: got %v, want ErrQuotaExceeded", err)
	}
	fmt.Fprintf(w, "  quota: 48 MiB allocated, 32 MiB more refused:\n    errors.Is(err, fcsp.ErrQuotaExceeded): %v\n", err)
	if err := inter.Free(buf); err != nil {
		return err
	}

	fn, err := workload.Kernel(batch, "chain")
	if err != nil {
		return err
	}
	const n = 256
	out, err := batch.Alloc(ctx, 4*n)
	if err != nil {
		return err
	}
	defer batch.Free(out)
	var args fcsp.Args
	args.Ptr(out).Int32(n).Int32(1)
	const launches = 100
	start := time.Now()
	for range launches {
		if err := batch.Stream().Launch(ctx, fn, fcsp.Dim3{X: uint32(8 * dev.SMs), Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &args); err != nil {
			return err
		}
	}
	if err := batch.Stream().Synchronize(); err != nil {
		return err
	}
	st := batch.Stats()
	fmt.Fprintf(w, "  limit: %d launches of a whole-device grid (%d threads) by %q took %v;\n"+
		"    %d of them waited for launch tokens, %v in all (Stats().Throttled, Stats().ThrottleWait)\n",
		st.Launches, 8*dev.SMs*256, batch.Name(), time.Since(start).Round(time.Millisecond), st.Throttled, st.ThrottleWait.Round(time.Millisecond))
	if dev.Simulated {
		fmt.Fprintln(w, "\n  Simulated: the SM counts, the quota and the launch accounting above are the SDK's own\n"+
			"  and hold as printed; kernels do not run, so no kernel time, throughput or isolation figure\n"+
			"  is shown here. Those (part 2) need a GPU: run this program on one.")
	}
	return nil
}
