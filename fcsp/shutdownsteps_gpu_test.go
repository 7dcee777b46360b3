package fcsp

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// TestGPUShutdownOrderSteps takes TestGPUShutdownOrder's round apart, for
// the defect issue 37 left open: from the commons on, that test ends 73 MiB
// short of the device's free memory after 7 rounds, where the fake finds
// no driver object left. Each variant runs 4 rounds of pools opened and
// closed beside a pool that holds the primary context, and says what each
// round cost; raw rounds do the same with bare green contexts, left current
// on a thread or not. One run on the H200 names the step that keeps memory.
func TestGPUShutdownOrderSteps(t *testing.T) {
	probe := openGPU(t)
	pt, err := probe.NewTenant("probe")
	require.NoError(t, err)
	free := func() int64 {
		f, _, err := pt.MemGetInfo()
		require.NoError(t, err)
		return int64(f)
	}
	ctx := context.Background()
	type variant struct {
		name    string
		tenants [][]TenantOption
		allocs  int
	}
	pooled := []TenantOption{WithMemoryPool(0), WithMemoryQuota(1 << 30)}
	variants := []variant{
		{"partition only", [][]TenantOption{{WithSMs(16)}}, 0},
		{"plain only (whole device)", [][]TenantOption{{}}, 8},
		{"partition + plain, no alloc", [][]TenantOption{{WithSMs(16)}, {}}, 0},
		{"partition + plain, 8 allocs", [][]TenantOption{{WithSMs(16)}, {}}, 8},
		{"partition + pooled", [][]TenantOption{{WithSMs(16)}, pooled}, 8},
		{"pooled only (whole device)", [][]TenantOption{pooled}, 8},
		{"TestGPUShutdownOrder's round", [][]TenantOption{{WithSMs(16)}, {}, pooled}, 8},
	}
	var leaks []string
	for _, v := range variants {
		start := free()
		var steps []string
		for round := range 4 {
			before := free()
			p, err := Open(ctx, 0)
			require.NoError(t, err)
			for i, opts := range v.tenants {
				tn, err := p.NewTenant(fmt.Sprintf("t%d", i), opts...)
				require.NoError(t, err, "%s", v.name)
				for range v.allocs {
					ptr, err := tn.Alloc(ctx, 32<<20)
					require.NoError(t, err)
					if len(opts) > 1 { // pooled: cached on its free list
						require.NoError(t, tn.Free(ptr))
					}
				}
			}
			require.NoError(t, p.Close(), "%s round %d", v.name, round)
			steps = append(steps, fmt.Sprintf("%+.1f", float64(free()-before)/(1<<20)))
		}
		lost := float64(start-free()) / (1 << 20)
		t.Logf("%-30s rounds (MiB of free memory) %s; lost over 4 rounds %.1f MiB", v.name, strings.Join(steps, " "), lost)
		if lost > 16 {
			leaks = append(leaks, fmt.Sprintf("%s: %.1f MiB", v.name, lost))
		}
	}
	// Bare green contexts over the SMs a 16-SM split leaves, as the commons
	// makes them, beside the probe's primary context: destroyed after being
	// made current on a thread that keeps them current, and after that
	// thread has gone back to the primary context.
	drv, dev := probe.drv, probe.dev.Ordinal()
	for _, leaveCurrent := range []bool{false, true} {
		start := free()
		for range 4 {
			res, err := drv.DeviceGetDevResource(dev, cuda.ResourceSM)
			require.NoError(t, err)
			_, rest, _, err := drv.DevSmResourceSplitByCount(res, 0, 16, 1)
			require.NoError(t, err)
			desc, err := drv.DevResourceGenerateDesc([]cuda.DevResource{rest})
			require.NoError(t, err)
			g, err := drv.GreenCtxCreate(desc, dev, cuda.GreenCtxDefaultStream)
			require.NoError(t, err)
			gc, err := drv.CtxFromGreenCtx(g)
			require.NoError(t, err)
			s, err := drv.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0)
			require.NoError(t, err)
			done := make(chan error)
			go func() {
				runtime.LockOSThread() // the thread ends with the goroutine
				err := drv.CtxSetCurrent(gc)
				if err == nil {
					var p cuda.DevicePtr
					if p, err = drv.MemAlloc(gc, 1<<20); err == nil {
						err = drv.MemFree(gc, p)
					}
				}
				if err == nil && !leaveCurrent {
					err = drv.CtxSetCurrent(probe.dev.Primary())
				}
				done <- err
				if leaveCurrent {
					select {} // keep the thread, and the green context current on it
				}
			}()
			require.NoError(t, <-done)
			require.NoError(t, drv.StreamDestroy(probe.dev.Primary(), s))
			require.NoError(t, drv.GreenCtxDestroy(g))
		}
		lost := float64(start-free()) / (1 << 20)
		t.Logf("raw green contexts, left current on a live thread %-5v: lost over 4 rounds %.1f MiB", leaveCurrent, lost)
		if lost > 16 {
			leaks = append(leaks, fmt.Sprintf("raw green contexts (left current %v): %.1f MiB", leaveCurrent, lost))
		}
	}
	require.Empty(t, leaks, "device memory not given back")
}
