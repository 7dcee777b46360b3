package fcsp

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/kernels"
)

// TestGPUPTXReaderAgreesWithTheDriver: the launch check's reader
// (internal/ptxsig) reads PTX as the driver does. A comment inside the
// parameter list hides no parameter from either; text that does not begin
// with .version, which the reader leaves unread, the driver refuses; past
// a NUL neither reads; and the reader's limit on a kernel's parameters,
// 32764 bytes, is the driver's.
func TestGPUPTXReaderAgreesWithTheDriver(t *testing.T) {
	p := openGPU(t)
	tn, err := p.NewTenant("t")
	require.NoError(t, err)
	ctx := context.Background()
	chain := string(kernels.ChainPTX)

	// Comments in the list: the chain runs with its three arguments, and
	// the pointer alone is refused.
	commented := strings.Replace(chain, ".param .u64 chain_param_0,",
		".param .u64 chain_param_0 // out (float*)\n, // .param .u32 old,\n/* , .param .u32 older */", 1)
	require.NotEqual(t, chain, commented)
	mod, err := tn.LoadModule([]byte(commented))
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	const n, steps = 4096, 64
	buf, err := tn.Alloc(ctx, 4*n)
	require.NoError(t, err)
	one, grid := Dim3{X: 256, Y: 1, Z: 1}, Dim3{X: n / 256, Y: 1, Z: 1}
	require.ErrorIs(t, tn.Stream().Launch(ctx, fn, grid, one, 0, new(Args).Ptr(buf)), ErrInvalidArgument)
	require.NoError(t, tn.Stream().Launch(ctx, fn, grid, one, 0, new(Args).Ptr(buf).Int32(n).Int32(steps)))
	require.NoError(t, tn.Stream().Synchronize())
	out := make([]byte, 4*n)
	require.NoError(t, tn.CopyFromDevice(out, buf))
	require.NoError(t, kernels.CheckChain(out, steps))

	// Not beginning with .version: the reader leaves it to the driver,
	// which must refuse it (were one loaded, its kernels would go
	// unchecked).
	for _, prefix := range []string{"#define X 1\n", "\xef\xbb\xbf", "x\n"} {
		_, err := tn.LoadModule([]byte(prefix + chain))
		t.Logf("%q + chain.ptx: %v", prefix, err)
		require.Error(t, err, "%q + chain.ptx loaded: the reader must read such text", prefix)
		require.NotErrorIs(t, err, ErrInvalidArgument, "the driver's refusal, not the reader's")
	}

	// Past a NUL: the driver has no kernel there either.
	mod, err = tn.LoadModule([]byte(chain + "\x00.visible .entry extra(.param .u64 p) { ret; }\n"))
	require.NoError(t, err)
	_, err = mod.Function("extra")
	require.ErrorIs(t, err, ErrNotFound, "a kernel past the NUL")

	// The limit on parameters: 32764 bytes load; 32768 the reader refuses,
	// and so does the driver given them directly.
	big := func(bytes int) []byte {
		return []byte(".version 8.1\n.target sm_70\n.address_size 64\n.visible .entry big(.param .align 4 .b8 a[" +
			strconv.Itoa(bytes) + "]) { ret; }\n")
	}
	_, err = tn.LoadModule(big(32764))
	require.NoError(t, err, "32764 bytes of parameters")
	_, err = tn.LoadModule(big(32768))
	require.ErrorIs(t, err, ErrInvalidArgument)
	pctx := p.dev.Primary()
	m, err := p.dev.LoadModule(pctx, big(32768))
	t.Logf("the driver given 32768 bytes of parameters: %v", err)
	if err == nil {
		require.NoError(t, p.dev.UnloadModule(pctx, m))
		t.Fatal("the driver loaded a kernel of 32768 bytes of parameters: ptxsig.MaxParamBytes is below its limit")
	}
}
