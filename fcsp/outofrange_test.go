package fcsp

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 58 item 8: a copy or memset past the end of the SDK's block it
// starts in is a typed error naming the block's size, the offset and the
// length, made before the driver sees the call (the simulator once
// answered a bare CUDA_ERROR_INVALID_VALUE with no sizes); the next block
// is untouched.
func TestCopyPastTheEndOfABlockIsRefused(t *testing.T) {
	p, drv := openSim(t)
	tn, err := p.NewTenant("a")
	require.NoError(t, err)
	ctx := t.Context()
	blk, err := tn.Alloc(ctx, 4096)
	require.NoError(t, err)
	next, err := tn.Alloc(ctx, 4096)
	require.NoError(t, err)
	pattern := bytes.Repeat([]byte{0xab}, 4096)
	require.NoError(t, tn.CopyToDevice(next, pattern))
	calls := func() int {
		return drv.Calls("cuMemcpyHtoD_v2") + drv.Calls("cuMemcpyDtoH_v2") + drv.Calls("cuMemsetD32Async") + drv.Calls("cuMemsetD16Async")
	}
	before := calls()

	err = tn.CopyToDevice(blk, make([]byte, 8192))
	require.ErrorIs(t, err, ErrOutOfRange)
	require.ErrorIs(t, err, ErrInvalidArgument)
	var te *TenantError
	require.True(t, errors.As(err, &te), "%v", err)
	require.Equal(t, `tenant "a": CopyToDevice: fcsp: range runs past the end of its allocation: CopyToDevice of 8192 bytes at offset 0 of the 4096-byte block at `+
		fmt.Sprintf("%#x", uint64(blk))+` runs 4096 bytes past its end; at most 4096 bytes fit from there`, err.Error())
	require.ErrorIs(t, tn.CopyFromDevice(make([]byte, 100), blk+4000), ErrOutOfRange)
	require.ErrorIs(t, tn.Stream().MemsetD32(blk, 0x22222222, 2048), ErrOutOfRange)
	require.ErrorIs(t, tn.Stream().MemsetD16(blk+4094, 1, 2), ErrOutOfRange)
	require.Equal(t, before, calls(), "refused before the driver")

	require.NoError(t, tn.Stream().Synchronize())
	got := make([]byte, 4096)
	require.NoError(t, tn.CopyFromDevice(got, next))
	require.Equal(t, pattern, got, "the next block is untouched")
	require.NoError(t, tn.CopyToDevice(blk, make([]byte, 4096)), "a copy that fits goes through")
	require.NoError(t, tn.Free(blk))
	require.NoError(t, tn.Free(next))
}
