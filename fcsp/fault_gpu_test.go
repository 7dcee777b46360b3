package fcsp

import (
	"context"
	"errors"
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
		t.Skipf("no NVIDIA driver on this machine (%v): GPU test skipped", err)
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
	raw := p.fault.raw
	ctx := tn.c.ctx()
	ptr, err := raw.MemAlloc(ctx, 1<<20)
	t.Logf("  raw driver, tenant %q: cuMemAlloc -> %v", tn.Name(), err)
	if err == nil {
		_ = raw.MemFree(ctx, ptr)
	}
	t.Logf("  raw driver, tenant %q: cuStreamSynchronize -> %v", tn.Name(), raw.StreamSynchronize(ctx, tn.Stream().h()))
	_, err = raw.StreamCreate(p.dev.Primary(), cuda.StreamNonBlocking)
	t.Logf("  raw driver: cuStreamCreate on the primary context -> %v", err)
}

// TestGPUDeviceLostAndReset: first the reset of a healthy pool is timed
// (a median of several; it works and keeps every tenant computing). Then
// one tenant's kernel writes to an illegal address; every tenant gets
// ErrDeviceLost; and Pool.Reset is refused with a typed ErrDeviceLost
// saying the process must be restarted, since the driver keeps a sticky
// fault through cuDevicePrimaryCtxReset_v2 (the H200's first run: the next
// cuDevicePrimaryCtxRetain answered CUDA_ERROR_ILLEGAL_ADDRESS). The pool
// stays lost for every call, and Close is clean.
func TestGPUDeviceLostAndReset(t *testing.T) {
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
	var healthy []time.Duration
	for r := 0; r < 5; r++ {
		start := time.Now()
		require.NoError(t, p.Reset(ctx))
		healthy = append(healthy, time.Since(start))
	}
	t.Logf("Pool.Reset of a healthy pool (3 tenants, 2 partitions + 1 spare, 1 pool): median %v of %v", median(healthy), healthy)
	for i, tn := range fs.tenants {
		require.NoError(t, chainOn(ctx, tn, tn.Stream(), fs.fns[i], 1<<16, 256), "tenant %s after the healthy resets", fs.names[i])
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

	start := time.Now()
	err = p.Reset(ctx)
	t.Logf("Pool.Reset after the fault: %v (in %v)", err, time.Since(start))
	require.ErrorIs(t, err, ErrDeviceLost)
	var lost *DeviceLostError
	require.ErrorAs(t, err, &lost)
	require.True(t, lost.NeedsRestart, "the driver kept the fault: only a new process can use the device")
	require.Contains(t, err.Error(), "exit and be restarted")
	require.True(t, p.Health().NeedsRestart)
	require.ErrorIs(t, p.Reset(ctx), ErrDeviceLost, "a second Reset refuses at once")
	for i, tn := range fs.tenants {
		_, err := tn.Alloc(ctx, 4096)
		require.ErrorIs(t, err, ErrDeviceLost, "tenant %s after the refused reset", fs.names[i])
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

// BenchmarkGPUReset times Pool.Reset of a healthy pool of three tenants
// (the fault itself is in TestGPUDeviceLostAndReset: a benchmark cannot
// fault the device without poisoning every benchmark after it). Beside it,
// in the same run, what the reset replaces: closing the pool and opening it
// again with the same tenants.
func BenchmarkGPUReset(b *testing.B) {
	if _, err := cuda.Load(); err != nil {
		b.Skipf("no NVIDIA driver on this machine (%v)", err)
	}
	ctx := context.Background()
	b.Run("reset", func(b *testing.B) {
		p, err := Open(ctx, 0, WithPrewarm(8))
		require.NoError(b, err)
		defer p.Close()
		set := newFaultSet(b, p)
		b.ResetTimer()
		for range b.N {
			if err := p.Reset(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		require.NoError(b, errors.Join(closeAll(set)...))
	})
	b.Run("reopen", func(b *testing.B) {
		for range b.N {
			p, err := Open(ctx, 0, WithPrewarm(8))
			require.NoError(b, err)
			set := newFaultSet(b, p)
			require.NoError(b, errors.Join(append(closeAll(set), p.Close())...))
		}
	})
}
