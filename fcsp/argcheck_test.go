package fcsp

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/modules"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// Issue 27 #1: a launch whose Args do not match the kernel's PTX parameters
// (one Int32 for chain(float*, int, int)) reached the device and, on the
// H200, faulted it for every tenant (CUDA_ERROR_ILLEGAL_ADDRESS). It is
// refused before the driver sees it, naming the signature; a match passes.
func TestLaunchRefusesArgsThatDoNotMatchThePTX(t *testing.T) {
	p, drv := openSim(t)
	tn, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	mod, err := tn.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	ctx := context.Background()
	one := Dim3{X: 1, Y: 1, Z: 1}
	s := tn.Stream()
	before := drv.StreamLaunches(s.c.h())
	for _, bad := range []func(a *Args){
		func(a *Args) { a.Int32(1000) },                       // the issue's: one int
		func(a *Args) { a.Ptr(0).Int32(1) },                   // one short
		func(a *Args) { a.Ptr(0).Int32(1).Int32(1).Int32(1) }, // one more
		func(a *Args) { a.Int32(0).Ptr(0).Int32(1) },          // a pointer where an int goes
		func(a *Args) { a.Ptr(0).Uint64(1).Int32(1) },         // 8 bytes where 4 go
	} {
		var a Args
		bad(&a)
		err := s.Launch(ctx, fn, one, one, 0, &a)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, "(.u64, .u32, .u32)")
		require.ErrorIs(t, s.TryLaunch(fn, one, one, 0, &a), ErrInvalidArgument)
	}
	require.Equal(t, before, drv.StreamLaunches(s.c.h()), "a refused launch reached the driver")
	ptr, err := tn.Alloc(ctx, 4*256)
	require.NoError(t, err)
	var a Args
	a.Ptr(ptr).Int32(256).Int32(2)
	require.NoError(t, s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &a))
	require.Equal(t, before+1, drv.StreamLaunches(s.c.h()))
}

// BenchmarkCheckArgs: what the argument check adds to a launch (chain's
// three parameters), beside the nil check it replaced and a launch of the
// simulator in the same run (the H200's cuLaunchKernel through the SDK is
// 3.3-3.5 us, docs/BENCHMARKS.md).
func BenchmarkCheckArgs(b *testing.B) {
	p, _ := openSim(b)
	tn, err := p.NewTenant("a", WithSMs(8))
	if err != nil {
		b.Fatal(err)
	}
	mod, err := tn.LoadModule(kernels.ChainPTX)
	if err != nil {
		b.Fatal(err)
	}
	fn, err := mod.Function("chain")
	if err != nil {
		b.Fatal(err)
	}
	buf, err := tn.Alloc(context.Background(), 4)
	if err != nil {
		b.Fatal(err)
	}
	var a Args
	a.Ptr(buf).Int32(1).Int32(1)
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if err := checkArgs(fn, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nil-check-only", func(b *testing.B) {
		unchecked := &Function{k: modules.Kernel{Name: fn.k.Name}}
		for b.Loop() {
			if err := checkArgs(unchecked, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("launch-simulated", func(b *testing.B) {
		ctx := context.Background()
		for b.Loop() {
			if err := tn.Stream().Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 1, Y: 1, Z: 1}, 0, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}
