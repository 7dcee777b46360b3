package fcsp

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const ptxHead = ".version 8.0\n.target sm_90\n.address_size 64\n"

// Issue 58 #1 through LoadModule: a // comment inside the parameter list
// hides no parameter, so a launch that packs only the pointer is refused
// and the launch that packs both is not.
func TestLaunchCheckReadsPastComments(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("t")
	require.NoError(t, err)
	mod, err := tn.LoadModule([]byte(ptxHead + ".visible .entry k(.param .u64 a // out (float*)\n, .param .u32 n)\n{ ret; }\n"))
	require.NoError(t, err)
	fn, err := mod.Function("k")
	require.NoError(t, err)
	ctx := context.Background()
	buf, err := tn.Alloc(ctx, 64)
	require.NoError(t, err)
	one := Dim3{X: 1, Y: 1, Z: 1}
	err = tn.Stream().Launch(ctx, fn, one, one, 0, new(Args).Ptr(buf))
	require.ErrorIs(t, err, ErrInvalidArgument, "the pointer alone")
	require.ErrorContains(t, err, "(.u64, .u32)")
	err = tn.Stream().Launch(ctx, fn, one, one, 0, new(Args).Ptr(buf).Uint32(16))
	require.NotErrorIs(t, err, ErrInvalidArgument, "the pointer and the count")
}

// Issue 58 #2 through LoadModule: a parameter whose size overflows is
// refused when the module loads, saying where.
func TestLoadModuleRefusesAnOverflowingParameter(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("t")
	require.NoError(t, err)
	_, err = tn.LoadModule([]byte(ptxHead + ".visible .entry k(.param .u64 a[1152921504606846976])\n{ ret; }\n"))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "line 4")
}

// A kernel the driver finds that the reader did not list would have its
// launches unchecked: Function refuses it. The simulator reads past a NUL
// where the driver and the reader stop, which is such a case.
func TestFunctionRefusesAKernelThePTXReaderDidNotList(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("t")
	require.NoError(t, err)
	mod, err := tn.LoadModule([]byte(ptxHead + ".visible .entry a() { ret; }\x00.visible .entry b(.param .u64 p) { ret; }"))
	require.NoError(t, err)
	_, err = mod.Function("a")
	require.NoError(t, err)
	_, err = mod.Function("b")
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, `declares no .entry of`)
	_, err = mod.Function("c")
	require.ErrorIs(t, err, ErrNotFound, "a kernel nobody has is the driver's not found")
}

// A cubin is the driver's: loaded unread, its launches unchecked here.
func TestLoadModuleLeavesACubinToTheDriver(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("t")
	require.NoError(t, err)
	_, err = tn.LoadModule([]byte("\x7fELF\x02\x01\x01"))
	require.ErrorIs(t, err, ErrInvalidImage, "the simulator refuses what is not PTX, as the driver does a bad cubin")
	require.NotErrorIs(t, err, ErrInvalidArgument)
}

// BenchmarkLoadModuleHostile loads issue 58's 1 MiB image (.entry repeated
// inside a comment) on the simulator: the PTX reader, then the simulated
// driver's load (issue 58 #3: 4.9-5.7 s before the reader was linear).
func BenchmarkLoadModuleHostile(b *testing.B) {
	p, _ := openSim(b)
	tn, err := p.NewTenant("t")
	require.NoError(b, err)
	img := []byte(ptxHead + "/*" + strings.Repeat(" .entry", (1<<20)/7) + " */\n")
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		_, err := tn.LoadModule(img) // kept until the tenant closes
		require.NoError(b, err)
	}
}
