package fcsp

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// The fault tests poison the device; if the driver could not bring it back,
// every GPU test after them in this process would fail for that reason. So
// each runs in a child process of the test binary, which the parent waits
// for; the child's log is the test's log.
const faultChildEnv = "FCSP_FAULT_CHILD"

func inFaultChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(faultChildEnv) == t.Name() {
		return true
	}
	if _, err := cuda.Load(); err != nil {
		gpuSkips.Skip(t, err) // counted in the package's skip line
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=240s")
	cmd.Env = append(os.Environ(), faultChildEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	t.Logf("child process (a fault poisons the whole process, so it runs apart):\n%s", out)
	require.NoError(t, err, "the child failed")
	return false
}

// rawProbe calls the driver itself on a tenant's context and stream, past
// the pool's watch, and logs what came back: the evidence of what a sticky
// error does to a neighbour.
func rawProbe(t *testing.T, p *Pool, tn *Tenant) {
	raw := p.drv.(*cuda.Guard).Unwrap()
	ctx := tn.c.cctx()
	ptr, err := raw.MemAlloc(ctx, 1<<20)
	t.Logf("  raw driver, tenant %q: cuMemAlloc -> %v", tn.Name(), err)
	if err == nil {
		_ = raw.MemFree(ctx, ptr)
	}
	t.Logf("  raw driver, tenant %q: cuStreamSynchronize -> %v", tn.Name(), raw.StreamSynchronize(ctx, tn.Stream().c.h()))
	_, err = raw.StreamCreate(p.dev.Primary(), cuda.StreamNonBlocking)
	t.Logf("  raw driver: cuStreamCreate on the primary context -> %v", err)
}

// TestGPUDeviceLost: one tenant's kernel writes to an illegal address;
// every tenant gets ErrDeviceLost and Health says RestartRequired (on the
// H200 the driver keeps a sticky fault even through
// cuDevicePrimaryCtxReset_v2, so Pool.Reset was removed). The pool stays
// lost for every call, and Close is clean.
func TestGPUDeviceLost(t *testing.T) {
	if !inFaultChild(t) {
		return
	}
	ctx := context.Background()
	p := openGPU(t, WithPrewarm(8))
	t.Logf("%s", p.Device())
	fs := newFaultSet(t, p)
	for i, tn := range fs.tenants {
		require.NoError(t, chainOn(ctx, tn, tn.Stream(), fs.fns[i], 1<<16, 256), "tenant %s before the fault", fs.names[i])
	}
	for _, tn := range fs.tenants {
		_, err := tn.Alloc(ctx, 1<<20) // held across the fault: Close must free it once, or forgive it
		require.NoError(t, err)
	}

	// The fault: the chain kernel given address 0x10.
	err := faultOn(ctx, fs.tenants[0].Stream(), fs.fns[0])
	t.Logf("tenant a, chain kernel writing to 0x10: %v", err)
	require.ErrorIs(t, err, ErrDeviceLost)
	var ce *CUDAError
	require.ErrorAs(t, err, &ce)
	t.Logf("sticky error: %s from %s (%d)", ce.Code.Name(), ce.Op, int(ce.Code))
	rawProbe(t, p, fs.tenants[1])
	rawProbe(t, p, fs.tenants[2])

	for i, tn := range fs.tenants {
		_, errAlloc := tn.Alloc(ctx, 4096)
		errLaunch := faultOn(ctx, tn.Stream(), fs.fns[i])
		errSync := tn.Stream().Synchronize()
		t.Logf("tenant %s after the fault: Alloc -> %v; Launch -> %v; Synchronize -> %v", fs.names[i], errAlloc, errLaunch, errSync)
		for _, e := range []error{errAlloc, errLaunch, errSync} {
			require.ErrorIs(t, e, ErrDeviceLost)
		}
	}

	h := p.Health()
	require.True(t, h.RestartRequired, "the driver keeps the fault: only a new process can use the device")
	t.Logf("Health: %v", h.Lost)
	for i, tn := range fs.tenants {
		_, err := tn.Alloc(ctx, 4096)
		require.ErrorIs(t, err, ErrDeviceLost, "tenant %s, later", fs.names[i])
		require.ErrorIs(t, tn.Stream().Synchronize(), ErrDeviceLost)
	}
	for i, err := range closeAll(fs) {
		require.NoError(t, err, "closing tenant %s of the lost pool", fs.names[i])
	}
	require.NoError(t, p.Close(), "closing the lost pool")
}

func closeAll(fs *faultSet) (errs []error) {
	for _, tn := range fs.tenants {
		errs = append(errs, tn.Close())
	}
	return errs
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
