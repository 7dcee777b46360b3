package fake_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// A fault poisons the primary context and every green context of the
// device, for every caller, until PrimaryCtxReset; the reset frees what the
// contexts held.
func TestStickyFaultUntilReset(t *testing.T) {
	drv := fake.New(fake.H200())
	primary, err := drv.PrimaryCtxRetain(0)
	require.NoError(t, err)
	res, err := drv.DeviceGetDevResource(0, cuda.ResourceSM)
	require.NoError(t, err)
	groups, _, _, err := drv.DevSmResourceSplitByCount(res, 0, 8, 4)
	require.NoError(t, err)
	green := func() (cuda.GreenCtx, error) {
		desc, err := drv.DevResourceGenerateDesc(groups[:1])
		require.NoError(t, err)
		return drv.GreenCtxCreate(desc, 0, cuda.GreenCtxDefaultStream)
	}
	g, err := green()
	require.NoError(t, err)
	gctx, err := drv.CtxFromGreenCtx(g)
	require.NoError(t, err)
	s, err := drv.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0)
	require.NoError(t, err)
	ptr, err := drv.MemAlloc(primary, 1<<20)
	require.NoError(t, err)

	drv.InjectFault(0, cuda.ErrorIllegalAddress)
	drv.InjectFault(0, cuda.ErrorMisalignedAddress) // the first one stays
	require.Equal(t, cuda.ErrorIllegalAddress, drv.Sticky(0))
	_, err = drv.MemAlloc(gctx, 1)
	require.ErrorIs(t, err, cuda.ErrorIllegalAddress, "a neighbour context")
	require.ErrorIs(t, drv.StreamSynchronize(0, s), cuda.ErrorIllegalAddress, "unscoped, the stream naming the context")
	require.ErrorIs(t, drv.CtxSynchronize(primary), cuda.ErrorIllegalAddress)
	_, err = green()
	require.ErrorIs(t, err, cuda.ErrorIllegalAddress, "no green context can be made")
	require.NoError(t, drv.GreenCtxDestroy(g), "destroying a poisoned green context is allowed")

	require.NoError(t, drv.PrimaryCtxReset(0))
	require.Equal(t, cuda.Success, drv.Sticky(0))
	require.Zero(t, drv.Live().Bytes, "allocations die with the context")
	require.Zero(t, drv.Live().Streams)
	require.Equal(t, 1, drv.Live().PrimaryRefs, "the retain count is unchanged")
	require.ErrorIs(t, drv.MemFree(primary, ptr), cuda.ErrorInvalidValue, "the pointer is gone")
	g, err = green()
	require.NoError(t, err)
	require.NoError(t, drv.GreenCtxDestroy(g))
	require.Equal(t, 1, drv.Resets())
}
