package smpart_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// realDriver loads libcuda.so.1 or skips the test, saying why.
func realDriver(t *testing.T) cuda.Driver {
	t.Helper()
	lib, err := cuda.Load()
	if errors.Is(err, cuda.ErrNoDriver) {
		skipGPU(t, err)
	}
	require.NoError(t, err)
	if n, err := lib.DeviceCount(); err != nil || n == 0 {
		t.Skipf("driver loaded but no device (%d, %v)", n, err)
	}
	return lib
}

func TestGPU(t *testing.T) {
	exerciseDevice(t, realDriver(t))
}

// TestGPUSplitProbe records the driver's whole split table (every minimum
// count, with and without the co-scheduling flag) where FCSP_PROBE_OUT
// names a folder.
func TestGPUSplitProbe(t *testing.T) {
	out := os.Getenv("FCSP_PROBE_OUT")
	if out == "" {
		t.Skip("FCSP_PROBE_OUT not set")
	}
	drv := realDriver(t)
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer dev.Close()
	res, err := drv.DeviceGetDevResource(dev.Ordinal(), cuda.ResourceSM)
	require.NoError(t, err)
	var b strings.Builder
	fmt.Fprintf(&b, "# %s; API %d\nflags\tminCount\tgroups\tSMs/group\tremainder\trc\n", dev.Info(), dev.APIVersion())
	for _, flags := range []uint32{0, cuda.SplitIgnoreCoscheduling} {
		for m := 1; m <= dev.SMs()+1; m++ {
			groups, rem, n, err := drv.DevSmResourceSplitByCount(res, flags, uint32(m), dev.SMs())
			size := 0
			if n > 0 {
				size = int(groups[0].SMCount())
			}
			fmt.Fprintf(&b, "%d\t%d\t%d\t%d\t%d\t%v\n", flags, m, n, size, rem.SMCount(), err)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(out, "split-probe.tsv"), []byte(b.String()), 0o644))
}

// TestGPULaunchUnscoped checks whether cuLaunchKernel accepts a
// green-context stream with no context current on the thread (the kernel
// loaded in that context), and whether the result is right: if so, launches
// could skip the push/pop and the partition lock.
func TestGPULaunchUnscoped(t *testing.T) {
	drv := realDriver(t)
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer dev.Close()
	s, err := dev.Split(dev.Granularity())
	require.NoError(t, err)
	p, err := s.Take(16)
	require.NoError(t, err)
	defer p.Close()
	const n, steps = 1 << 16, 256
	out := make([]byte, 4*n)
	var mod cuda.Module
	var fn cuda.Function
	var buf cuda.DevicePtr
	require.NoError(t, p.Do(func(ctx cuda.Context) (err error) {
		if mod, err = drv.ModuleLoadData(ctx, kernels.ChainPTX); err != nil {
			return err
		}
		if fn, err = drv.ModuleGetFunction(ctx, mod, "chain"); err != nil {
			return err
		}
		buf, err = drv.MemAlloc(ctx, 4*n)
		return err
	}))
	var a cuda.Args
	a.Ptr(buf).Int32(n).Int32(steps)
	// A zero context: the shim pushes nothing.
	err = drv.LaunchKernel(0, fn, cuda.Dim3{X: n / 256, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, p.Stream(), &a)
	t.Logf("unscoped launch on a green-context stream: %v", err)
	require.NoError(t, p.Do(func(ctx cuda.Context) error {
		if err == nil {
			if err := drv.StreamSynchronize(ctx, p.Stream()); err != nil {
				return err
			}
			if err := drv.MemcpyDtoH(ctx, out, buf); err != nil {
				return err
			}
		}
		return errors.Join(drv.MemFree(ctx, buf), drv.ModuleUnload(ctx, mod))
	}))
	if err == nil {
		require.NoError(t, kernels.CheckChain(out, steps))
		// And waiting without a context.
		require.NoError(t, drv.StreamSynchronize(0, p.Stream()))
	}
}
