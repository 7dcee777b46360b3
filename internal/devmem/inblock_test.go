package devmem

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// A copy or fill that starts inside a block the SDK allocated and runs
// past its end is refused before the driver sees it, with the block's
// size, the offset and the length; one that fits goes to the driver. So
// for both engines, and for another tenant's block too. A pointer the SDK
// did not allocate goes to the driver, which judges it as before.
func TestCopiesAndFillsStayInTheirBlock(t *testing.T) {
	for _, engine := range []string{"pooled", "plain"} {
		t.Run(engine, func(t *testing.T) {
			d := newDevice(t, 0, 0)
			var pool *PoolConfig
			if engine == "pooled" {
				pool = pooledWith(1 << 30)
			}
			a := d.newTenant("a", 1<<30, pool, false)
			b := d.newTenant("b", 1<<30, pool, false)
			s := a.first()
			p, err := a.mem.Alloc(s, 4096)
			require.NoError(t, err)
			next, err := a.mem.Alloc(s, 4096)
			require.NoError(t, err)
			ops := a.mem.Ops()
			calls := func() int {
				return d.drv.Calls("cuMemcpyHtoD_v2") + d.drv.Calls("cuMemcpyDtoH_v2") +
					d.drv.Calls("cuMemsetD16Async") + d.drv.Calls("cuMemsetD32Async")
			}
			refused := func(err error, msg ...string) {
				t.Helper()
				require.ErrorIs(t, err, errs.ErrOutOfRange)
				require.ErrorIs(t, err, errs.ErrInvalidArgument)
				for _, m := range msg {
					require.Contains(t, err.Error(), m)
				}
			}
			before := calls()
			refused(ops.CopyToDevice(p, make([]byte, 8192)), "CopyToDevice of 8192 bytes at offset 0 of the 4096-byte block", "at most 4096 bytes fit")
			refused(ops.CopyToDevice(p+1024, make([]byte, 3073)), "3073 bytes at offset 1024 of the 4096-byte block", "runs 1 bytes past its end")
			refused(ops.CopyFromDevice(make([]byte, 4097), p), "CopyFromDevice of 4097 bytes")
			refused(ops.CopyFromDevice(make([]byte, 2), p+4095), "offset 4095")
			refused(ops.MemsetD32(s, p, 7, 1025), "MemsetD32 of 4100 bytes")
			refused(ops.MemsetD16(s, p+2048, 7, 1025), "MemsetD16 of 2050 bytes at offset 2048")
			refused(b.mem.Ops().CopyToDevice(p, make([]byte, 4097)), "4096-byte block") // another tenant's block
			require.Equal(t, before, calls(), "refused before the driver")
			require.ErrorIs(t, ops.MemsetD32(s, p, 0, math.MaxUint64), errs.ErrInvalidArgument, "overflows 64 bits")

			// What fits goes through, and leaves the next block alone.
			require.NoError(t, ops.CopyToDevice(next, []byte{1, 2, 3, 4}))
			require.NoError(t, ops.CopyToDevice(p, make([]byte, 4096)))
			require.NoError(t, ops.CopyToDevice(p+1024, make([]byte, 3072)))
			require.NoError(t, ops.MemsetD32(s, p, 0xffffffff, 1024))
			require.NoError(t, ops.MemsetD16(s, p+4094, 0xffff, 1))
			out := make([]byte, 4096)
			require.NoError(t, ops.CopyFromDevice(out, p))
			require.NoError(t, d.drv.StreamSynchronize(d.primary, s.h))
			got := make([]byte, 4)
			require.NoError(t, ops.CopyFromDevice(got, next))
			require.Equal(t, []byte{1, 2, 3, 4}, got)
			require.Equal(t, before+7, calls())

			// A pointer the SDK did not allocate: the driver's to judge.
			raw, err := d.drv.MemAlloc(d.primary, 4096)
			require.NoError(t, err)
			err = ops.CopyToDevice(raw, make([]byte, 8192))
			require.ErrorIs(t, err, cuda.ErrorInvalidValue, "the driver's answer, as before")
			require.NotErrorIs(t, err, errs.ErrOutOfRange)
			require.NoError(t, ops.CopyToDevice(raw, make([]byte, 4096)))
			require.NoError(t, d.drv.MemFree(d.primary, raw))

			require.NoError(t, a.mem.Free(s, p))
			require.NoError(t, a.mem.Free(s, next))
			require.NoError(t, a.close())
			require.NoError(t, b.close())
		})
	}
}

// BenchmarkInBlock is the check alone, with blocks of 13 size classes
// live: at a block's start (one probe of the records), inside it, and for
// a pointer no block holds (every size class probed). fcsp's
// BenchmarkCopyCheck puts it beside copies.
func BenchmarkInBlock(b *testing.B) {
	d := newDevice(b, 0, 0)
	tn := d.newTenant("a", 1<<30, pooledWith(1<<30), false)
	s := tn.first()
	for i := range 12 {
		if _, err := tn.mem.Alloc(s, uint64(512)<<i); err != nil {
			b.Fatal(err)
		}
	}
	p, err := tn.mem.Alloc(s, 64<<20)
	if err != nil {
		b.Fatal(err)
	}
	ops := tn.mem.Ops()
	for _, c := range []struct {
		name string
		p    cuda.DevicePtr
		n    uint64
	}{{"start", p, 64 << 20}, {"inside", p + 512, 64<<20 - 512}, {"foreign", 0x1000, 1 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := ops.InBlock("CopyToDevice", c.p, c.n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
