package greenctx_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// realDriver loads libcuda.so.1 or skips the test, saying why.
func realDriver(t *testing.T) cuda.Driver {
	t.Helper()
	lib, err := cuda.Load()
	if errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("no NVIDIA driver on this machine (%v): GPU test skipped", err)
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
	dev, err := greenctx.Open(drv, 0)
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
