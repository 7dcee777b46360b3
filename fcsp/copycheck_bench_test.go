package fcsp

import (
	"context"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// BenchmarkCopyCheck is what the range check (issue 58 item 8) costs a
// copy: Tenant.CopyToDevice of 4 KiB and of 64 MiB at a block's start
// (checked) beside the same call without the check (unchecked: the life
// lock and the driver's copy, which is all CopyToDevice was before), in
// one run, with blocks of 12 other sizes live. On the simulator a copy is
// a memmove; on a GPU (benchPool takes it where there is one) it is
// cuMemcpyHtoD and the check costs the same, so the GPU's ratio is the
// one to read.
func BenchmarkCopyCheck(b *testing.B) {
	p := benchPool(b)
	tn, err := p.NewTenant("copy")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 12 {
		blk, err := tn.Alloc(ctx, uint64(512)<<i)
		if err != nil {
			b.Fatal(err)
		}
		defer tn.Free(blk)
	}
	c := tn.c
	for _, size := range []int{4 << 10, 64 << 20} {
		blk, err := tn.Alloc(ctx, uint64(size))
		if err != nil {
			b.Fatal(err)
		}
		defer tn.Free(blk)
		src := make([]byte, size)
		name := map[int]string{4 << 10: "4KiB", 64 << 20: "64MiB"}[size]
		b.Run(name+"/unchecked", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				slot, err := c.enter()
				if err != nil {
					b.Fatal(err)
				}
				err = c.memOps.Driver.MemcpyHtoD(p.dev.Primary(), cuda.DevicePtr(blk), src)
				c.life.Exit(slot)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/checked", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := tn.CopyToDevice(blk, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
