package fake

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// RegisterKernels gives d Go bodies for package kernels' PTX (chain, spin),
// so that fake runs compute real results (slowly: keep sizes small).
func RegisterKernels(d *Driver) {
	d.RegisterKernel("chain", func(mem *Memory, grid, block cuda.Dim3, args []byte, offs []uint32) error {
		if len(offs) != 3 {
			return fmt.Errorf("chain takes 3 parameters, got %d", len(offs))
		}
		out := cuda.DevicePtr(binary.LittleEndian.Uint64(args[offs[0]:]))
		n := int(int32(binary.LittleEndian.Uint32(args[offs[1]:])))
		steps := int(int32(binary.LittleEndian.Uint32(args[offs[2]:])))
		threads := int(grid.Count() * block.Count())
		buf, ok := mem.Slice(out, uint64(4*min(n, threads)))
		if !ok {
			return fmt.Errorf("chain: output out of bounds")
		}
		for i := 0; i < min(n, threads); i++ {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(kernels.ChainValue(i, steps)))
		}
		return nil
	})
	d.RegisterKernel("spin", func(*Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error { return nil })
}
