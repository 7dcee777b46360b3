package fake_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// Issue 54: every object the SDK makes holds device memory, as the SDK
// charges it (cuda.StreamCost, EventCost, ModuleCost, GreenCtxCost): the
// fake's free memory and the process's figure (what NVML reports) fall by
// it while the object lives, and a retained primary context holds
// PrimaryCtxCost beside.
func TestObjectsHoldDeviceMemory(t *testing.T) {
	spec := fake.H200()
	spec.PrimaryCtxCost = 500 << 20
	drv := fake.New(spec)
	require.Zero(t, drv.ProcessMemory(), "nothing retained, nothing held")
	ctx, err := drv.PrimaryCtxRetain(0)
	require.NoError(t, err)
	held := func() uint64 {
		free, total, err := drv.MemGetInfo(ctx)
		require.NoError(t, err)
		require.Equal(t, total-free, drv.ProcessMemory(), "MemGetInfo and the process's figure agree")
		return drv.ProcessMemory()
	}
	base := held()
	require.Equal(t, spec.PrimaryCtxCost, base)

	s, err := drv.StreamCreate(ctx, cuda.StreamNonBlocking)
	require.NoError(t, err)
	require.Equal(t, base+cuda.StreamCost, held(), "a stream")
	mod, err := drv.ModuleLoadData(ctx, kernels.ChainPTX)
	require.NoError(t, err)
	require.Equal(t, base+cuda.StreamCost+cuda.ModuleCost(len(kernels.ChainPTX)), held(), "a module")
	ev, err := drv.EventCreate(ctx, cuda.EventDefault)
	require.NoError(t, err)
	require.Equal(t, base+cuda.StreamCost+cuda.ModuleCost(len(kernels.ChainPTX))+cuda.EventCost, held(), "an event")
	p, err := drv.MemAlloc(ctx, 3<<20)
	require.NoError(t, err)
	require.Equal(t, base+cuda.StreamCost+cuda.ModuleCost(len(kernels.ChainPTX))+cuda.EventCost+3<<20, held(), "an allocation")

	require.NoError(t, drv.MemFree(ctx, p))
	require.NoError(t, drv.EventDestroy(ctx, ev))
	require.NoError(t, drv.ModuleUnload(ctx, mod))
	require.NoError(t, drv.StreamDestroy(ctx, s))
	require.Equal(t, base, held(), "each gives its memory back when destroyed")

	res, err := drv.DeviceGetDevResource(0, cuda.ResourceSM)
	require.NoError(t, err)
	desc, err := drv.DevResourceGenerateDesc([]cuda.DevResource{res})
	require.NoError(t, err)
	g, err := drv.GreenCtxCreate(desc, 0, cuda.GreenCtxDefaultStream)
	require.NoError(t, err)
	require.NoError(t, drv.GreenCtxDestroy(g))
	require.Equal(t, base+cuda.GreenCtxCost, held(), "a green context's memory outlives it while the primary context lives")

	require.NoError(t, drv.PrimaryCtxRelease(0))
	require.Zero(t, drv.ProcessMemory(), "the primary context's release gives back what it held")
}

func TestModuleCostIsWholePages(t *testing.T) {
	for n, want := range map[int]uint64{0: cuda.ModulePage, 1: cuda.ModulePage, int(cuda.ModulePage): cuda.ModulePage, int(cuda.ModulePage) + 1: 2 * cuda.ModulePage} {
		require.Equal(t, want, cuda.ModuleCost(n), "image of %d bytes", n)
	}
}
