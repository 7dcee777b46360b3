package fcsp

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// TestGPUCopyPastTheEndOfABlock (issue 58 item 8, on a GPU): a copy and a
// memset past the end of a 4 KiB block that the tenant's pool handed out
// inside one of its chunks are refused by the SDK before the driver sees
// them (ErrOutOfRange, no CUDAError in the chain), and the next block's
// contents stay as they were. Then the same copy and memset are made with
// the driver alone (the internal binding, no check), and what the driver
// did is logged beside: its error, and whether the next block was
// written. The test passes whatever the driver does; its log is the
// record.
func TestGPUCopyPastTheEndOfABlock(t *testing.T) {
	p := openGPU(t)
	tn, err := p.NewTenant("oob")
	require.NoError(t, err)
	defer func() { require.NoError(t, tn.Close()) }()
	ctx := context.Background()

	// Blocks of 4 KiB from the pool, which maps a chunk at a time: the
	// two nearest each other are a block and the next one in its chunk.
	var ptrs []DevicePtr
	for range 8 {
		b, err := tn.Alloc(ctx, 4096)
		require.NoError(t, err)
		ptrs = append(ptrs, b)
	}
	defer func() {
		for _, b := range ptrs {
			require.NoError(t, tn.Free(b))
		}
	}()
	sorted := slices.Clone(ptrs)
	slices.Sort(sorted)
	blk, next := sorted[0], sorted[1]
	for i := 1; i+1 < len(sorted); i++ {
		if sorted[i+1]-sorted[i] < next-blk {
			blk, next = sorted[i], sorted[i+1]
		}
	}
	addrs := make([]uint64, len(sorted))
	for i, b := range sorted {
		addrs[i] = uint64(b)
	}
	t.Logf("device %s; the block at %#x, the next at %#x (%d bytes on; the blocks: %#x)", p.Device().Name, uint64(blk), uint64(next), next-blk, addrs)
	require.Less(t, uint64(next-blk), uint64(8192), "the 8 KiB copy from the block reaches the next one")

	pattern := bytes.Repeat([]byte{0xab}, 4096)
	readNext := func() []byte {
		t.Helper()
		require.NoError(t, tn.Stream().Synchronize())
		got := make([]byte, 4096)
		require.NoError(t, tn.CopyFromDevice(got, next))
		return got
	}
	require.NoError(t, tn.CopyToDevice(next, pattern))

	// The SDK: refused before the driver, the next block untouched.
	var ce *CUDAError
	err = tn.CopyToDevice(blk, bytes.Repeat([]byte{0x11}, 8192))
	require.ErrorIs(t, err, ErrOutOfRange)
	require.False(t, errors.As(err, &ce), "no driver call: %v", err)
	t.Logf("SDK copy: %v", err)
	err = tn.Stream().MemsetD32(blk, 0x22222222, 2048)
	require.ErrorIs(t, err, ErrOutOfRange)
	require.False(t, errors.As(err, &ce), "no driver call: %v", err)
	t.Logf("SDK memset: %v", err)
	require.Equal(t, pattern, readNext(), "the next block's contents changed")
	t.Logf("SDK: the next block's contents unchanged after the refused copy and memset")

	// The driver alone, with the same copy and memset.
	reached := func(got []byte) string {
		if bytes.Equal(got, pattern) {
			return "untouched"
		}
		return "WRITTEN"
	}
	primary := p.dev.Primary()
	raw := p.drv.MemcpyHtoD(primary, cuda.DevicePtr(blk), bytes.Repeat([]byte{0x11}, 8192))
	got := readNext()
	t.Logf("driver alone: cuMemcpyHtoD of 8192 bytes at the 4096-byte block: err=%v; the next block %s (first bytes % x)", raw, reached(got), got[:8])
	require.NoError(t, tn.CopyToDevice(next, pattern))
	s, err := p.drv.StreamCreate(primary, cuda.StreamNonBlocking)
	require.NoError(t, err)
	raw = p.drv.MemsetD32Async(primary, cuda.DevicePtr(blk), 0x22222222, 2048, s)
	serr := p.drv.StreamSynchronize(primary, s)
	require.NoError(t, p.drv.StreamDestroy(primary, s))
	got = readNext()
	t.Logf("driver alone: cuMemsetD32Async of 2048 words at the 4096-byte block: err=%v, sync err=%v; the next block %s (first bytes % x)", raw, serr, reached(got), got[:8])
	t.Logf("health after: %+v", p.Health())
}
