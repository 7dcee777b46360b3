package fake_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// TestH200SplitsLikeTheRealOne replays every split the H200's driver made
// (testdata/h200-split-probe.tsv, recorded by TestGPUSplitProbe) on the fake.
func TestH200SplitsLikeTheRealOne(t *testing.T) {
	f, err := os.Open("../../../testdata/h200-split-probe.tsv")
	require.NoError(t, err)
	defer f.Close()
	drv := fake.New(fake.H200())
	res, err := drv.DeviceGetDevResource(0, cuda.ResourceSM)
	require.NoError(t, err)
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "flags") {
			continue
		}
		var flags, minCount uint32
		var groups, size, rem int
		_, err := fmt.Sscanf(line, "%d\t%d\t%d\t%d\t%d", &flags, &minCount, &groups, &size, &rem)
		require.NoError(t, err, line)
		wantErr := strings.Contains(line, "CUDA_ERROR")
		_, _, n, err := drv.DevSmResourceSplitByCount(res, flags, minCount, 0)
		if wantErr {
			require.ErrorIs(t, err, cuda.ErrorInvalidResourceConfig, line)
			continue
		}
		require.NoError(t, err, line)
		require.Equal(t, groups, n, "simulated count, %s", line)
		got, r, n, err := drv.DevSmResourceSplitByCount(res, flags, minCount, 200)
		require.NoError(t, err)
		require.Equal(t, groups, n, line)
		require.Equal(t, size, int(got[0].SMCount()), line)
		require.Equal(t, rem, int(r.SMCount()), line)
		rows++
	}
	require.Greater(t, rows, 260)
}

func TestDescriptorsMustComeFromOneSplit(t *testing.T) {
	drv := fake.New(fake.H200())
	res, _ := drv.DeviceGetDevResource(0, cuda.ResourceSM)
	a, _, _, err := drv.DevSmResourceSplitByCount(res, 0, 8, 2)
	require.NoError(t, err)
	b, _, _, err := drv.DevSmResourceSplitByCount(res, 0, 8, 2)
	require.NoError(t, err)
	_, err = drv.DevResourceGenerateDesc([]cuda.DevResource{a[0], b[1]})
	require.ErrorIs(t, err, cuda.ErrorInvalidResourceConfig)
	d, err := drv.DevResourceGenerateDesc(a)
	require.NoError(t, err)
	_, err = drv.GreenCtxCreate(d, 0, 0)
	require.ErrorIs(t, err, cuda.ErrorInvalidValue, "cuGreenCtxCreate wants CU_GREEN_CTX_DEFAULT_STREAM")
	g, err := drv.GreenCtxCreate(d, 0, cuda.GreenCtxDefaultStream)
	require.NoError(t, err)
	_, err = drv.GreenCtxStreamCreate(g, 0, 0)
	require.ErrorIs(t, err, cuda.ErrorInvalidValue, "green-context streams must be non-blocking")
	require.NoError(t, drv.GreenCtxDestroy(g))
	require.ErrorIs(t, drv.GreenCtxDestroy(g), cuda.ErrorInvalidHandle)
}

func TestMemoryRunsOutAndFaultsInject(t *testing.T) {
	spec := fake.H200()
	spec.TotalMem = 1 << 20
	drv := fake.New(spec)
	ctx, err := drv.PrimaryCtxRetain(0)
	require.NoError(t, err)
	p, err := drv.MemAlloc(ctx, 1<<20)
	require.NoError(t, err)
	_, err = drv.MemAlloc(ctx, 1)
	require.ErrorIs(t, err, cuda.ErrorOutOfMemory)
	require.NoError(t, drv.MemFree(ctx, p))
	require.ErrorIs(t, drv.MemFree(ctx, p), cuda.ErrorInvalidValue, "double free")
	drv.FailNext("cuMemAlloc_v2", cuda.ErrorUnknown)
	_, err = drv.MemAlloc(ctx, 16)
	require.ErrorIs(t, err, cuda.ErrorUnknown)
	_, err = drv.MemAlloc(0, 16)
	require.ErrorIs(t, err, cuda.ErrorInvalidContext, "no context: 201, as on the GPU")
	require.NoError(t, drv.PrimaryCtxRelease(0))
}

// TestH200PoolsLikeTheRealOne replays the H200's pool probe
// (testdata/h200-pool-probe.tsv, recorded by fcsp.TestGPUPoolProbe): how
// many blocks a pool of each maximum size hands out, and what it then holds.
func TestH200PoolsLikeTheRealOne(t *testing.T) {
	rows, err := fake.ReadPoolProbes("../../../testdata/h200-pool-probe.tsv")
	require.NoError(t, err)
	require.Len(t, rows, 11)
	drv := fake.New(fake.H200())
	dev, err := drv.DeviceGet(0)
	require.NoError(t, err)
	ctx, err := drv.PrimaryCtxRetain(dev)
	require.NoError(t, err)
	for _, want := range rows {
		got, err := fake.ProbePool(drv, ctx, dev, want.MaxSize, want.Block)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	require.Zero(t, drv.Live().Bytes, "every pool gave its memory back")
}

// entry points added for lib

func TestCaptureRulesAsTheDriver(t *testing.T) {
	d := fake.New(fake.H200())
	dev, err := d.DeviceGet(0)
	require.NoError(t, err)
	ctx, err := d.PrimaryCtxRetain(dev)
	require.NoError(t, err)
	s, err := d.StreamCreate(ctx, cuda.StreamNonBlocking)
	require.NoError(t, err)
	// The legacy NULL stream cannot be captured.
	require.ErrorIs(t, d.StreamBeginCapture(ctx, 0, cuda.CaptureModeGlobal), cuda.ErrorStreamCaptureUnsupported)
	_, err = d.StreamEndCapture(ctx, s)
	require.ErrorIs(t, err, cuda.ErrorIllegalState, "end without begin")
	p, err := d.MemAlloc(ctx, 64)
	require.NoError(t, err)

	// A memset captured in global mode is recorded, not run; an unsafe call
	// (cuMemAlloc) during the capture fails and invalidates it.
	require.NoError(t, d.StreamBeginCapture(ctx, s, cuda.CaptureModeGlobal))
	require.ErrorIs(t, d.StreamBeginCapture(ctx, s, cuda.CaptureModeGlobal), cuda.ErrorIllegalState)
	require.NoError(t, d.MemsetD16Async(ctx, p, 0x3f80, 32, s))
	out := make([]byte, 64)
	_, err = d.MemAlloc(ctx, 64)
	require.ErrorIs(t, err, cuda.ErrorStreamCaptureUnsupported)
	_, err = d.StreamEndCapture(ctx, s)
	require.ErrorIs(t, err, cuda.ErrorStreamCaptureInvalidated)

	// Relaxed: nothing refused; the memset replays on launch.
	require.NoError(t, d.StreamBeginCapture(ctx, s, cuda.CaptureModeRelaxed))
	require.NoError(t, d.MemsetD16Async(ctx, p, 0x3f80, 32, s))
	q, err := d.MemAlloc(ctx, 64)
	require.NoError(t, err)
	g, err := d.StreamEndCapture(ctx, s)
	require.NoError(t, err)
	require.NoError(t, d.MemcpyDtoH(ctx, out, p))
	require.Equal(t, make([]byte, 64), out, "captured, not run")
	e, err := d.GraphInstantiate(ctx, g)
	require.NoError(t, err)
	require.NoError(t, d.GraphLaunch(0, e, s))
	require.NoError(t, d.MemcpyDtoH(ctx, out, p))
	for i := 0; i < 64; i += 2 {
		require.Equal(t, []byte{0x80, 0x3f}, out[i:i+2])
	}
	require.NoError(t, d.MemsetD32Async(ctx, q, 0xdeadbeef, 16, s))
	require.ErrorIs(t, d.MemsetD32Async(ctx, q+2, 1, 1, s), cuda.ErrorInvalidValue, "misaligned")
	require.NoError(t, d.GraphExecDestroy(ctx, e))
	require.NoError(t, d.GraphDestroy(ctx, g))
	require.ErrorIs(t, d.GraphLaunch(ctx, e, s), cuda.ErrorInvalidValue)
	require.ErrorIs(t, d.GraphDestroy(ctx, g), cuda.ErrorInvalidValue)
}

// cuGreenCtxDestroy leaves the green context's streams to their owner (the
// driver API's documentation): they stay live, answer every call but
// cuStreamDestroy with CUDA_ERROR_STREAM_DETACHED, and are gone only when
// destroyed. The fake once dropped them with the context, which hid a
// stream leaked past its context from every Live check.
func TestStreamsOutliveTheirGreenContext(t *testing.T) {
	drv := fake.New(fake.H200())
	res, _ := drv.DeviceGetDevResource(0, cuda.ResourceSM)
	parts, _, _, err := drv.DevSmResourceSplitByCount(res, 0, 8, 1)
	require.NoError(t, err)
	d, err := drv.DevResourceGenerateDesc(parts)
	require.NoError(t, err)
	g, err := drv.GreenCtxCreate(d, 0, cuda.GreenCtxDefaultStream)
	require.NoError(t, err)
	s, err := drv.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0)
	require.NoError(t, err)
	primary, err := drv.PrimaryCtxRetain(0)
	require.NoError(t, err)
	require.NoError(t, drv.GreenCtxDestroy(g))
	require.Equal(t, 1, drv.Live().Streams, "the stream outlives its green context")
	require.ErrorIs(t, drv.StreamSynchronize(primary, s), cuda.ErrorStreamDetached)
	require.NoError(t, drv.StreamDestroy(primary, s))
	require.Zero(t, drv.Live().Streams)
}
