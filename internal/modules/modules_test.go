package modules

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/kernels"
)

func open(t *testing.T) (*fake.Driver, *smpart.Device) {
	t.Helper()
	drv := fake.New(fake.H200())
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	return drv, dev
}

// A kernel of PTX text is checked at each launch against the parameters
// its PTX declares; the set's Close unloads what was loaded.
func TestKernelChecksItsArgsAndCloseUnloads(t *testing.T) {
	drv, dev := open(t)
	ctx := dev.Primary()
	var s Set
	var mu sync.Mutex
	var m Module
	require.NoError(t, m.Read(kernels.ChainPTX))
	require.NoError(t, s.Load(&m, &mu, dev, ctx, kernels.ChainPTX))
	var k Kernel
	require.NoError(t, m.Kernel(&k, dev, ctx, "chain"))
	require.Equal(t, "chain", k.Name)
	var args cuda.Args
	args.Ptr(0).Int32(1).Int32(2)
	require.NoError(t, k.CheckArgs(&args))
	args.Reset().Int32(1)
	require.ErrorIs(t, k.CheckArgs(&args), errs.ErrInvalidArgument, "one int32 where chain reads a pointer and two")
	require.Error(t, m.Kernel(&k, dev, ctx, "none"), "a kernel the module lacks")
	require.NoError(t, s.Close(&mu, dev, ctx))
	_, err := drv.ModuleGetFunction(ctx, m.h, "chain")
	require.ErrorIs(t, err, cuda.ErrorInvalidHandle, "the module outlived its set's Close")
	require.NoError(t, s.Close(&mu, dev, ctx), "a second Close unloads nothing again")
}

// A kernel the driver finds but the PTX reader did not (here, in a
// comment) is refused: the launch check would check nothing.
func TestKernelTheReaderDidNotSeeIsRefused(t *testing.T) {
	_, dev := open(t)
	ctx := dev.Primary()
	image := append(append([]byte(nil), kernels.ChainPTX...), "\n// .entry ghost\n"...)
	var s Set
	var mu sync.Mutex
	var m Module
	require.NoError(t, m.Read(image))
	require.NoError(t, s.Load(&m, &mu, dev, ctx, image))
	var k Kernel
	require.ErrorIs(t, m.Kernel(&k, dev, ctx, "ghost"), errs.ErrInvalidArgument)
	require.NoError(t, s.Close(&mu, dev, ctx))
}
