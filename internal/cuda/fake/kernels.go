package fake

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// RegisterKernels gives d Go bodies for package kernels' PTX (chain, spin,
// triad),
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
	// spin ends at once, but for spin(kernels.SpinForever), which never
	// ends until ReleaseSpins (queue.go).
	d.RegisterKernel("spin", func(*Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error { return nil })
	d.neverEnds("spin", func(args []byte, offs []uint32) bool {
		return len(offs) == 1 && len(args) >= int(offs[0])+8 && binary.LittleEndian.Uint64(args[offs[0]:]) == kernels.SpinForever
	})
	d.RegisterKernel("triad", triad) // entry points added for bw
}

// triad is kernels.TriadPTX's a[i] = b[i] + s*c[i] over n elements (a
// grid-stride loop: the grid does not bound n).
func triad(mem *Memory, _, _ cuda.Dim3, args []byte, offs []uint32) error {
	if len(offs) != 5 {
		return fmt.Errorf("triad takes 5 parameters, got %d", len(offs))
	}
	ptr := func(i int) cuda.DevicePtr { return cuda.DevicePtr(binary.LittleEndian.Uint64(args[offs[i]:])) }
	s := math.Float32frombits(binary.LittleEndian.Uint32(args[offs[3]:]))
	n := uint64(binary.LittleEndian.Uint32(args[offs[4]:]))
	a, okA := mem.Slice(ptr(0), 4*n)
	b, okB := mem.Slice(ptr(1), 4*n)
	c, okC := mem.Slice(ptr(2), 4*n)
	if !okA || !okB || !okC {
		return fmt.Errorf("triad: an array of %d elements out of bounds", n)
	}
	for i := uint64(0); i < 4*n; i += 4 {
		v := kernels.TriadValue(s, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])), math.Float32frombits(binary.LittleEndian.Uint32(c[i:])))
		binary.LittleEndian.PutUint32(a[i:], math.Float32bits(v))
	}
	return nil
}
