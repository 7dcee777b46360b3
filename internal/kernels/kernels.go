// Package kernels holds the PTX of the SDK's test and example kernels, and Go
// models of them for the fake driver and for checking results.
package kernels

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// PTX is chain.ptx: the entries "chain" (the day-94 dependent FMA chain) and
// "spin" (busy-wait a number of clock cycles).
//
//go:embed chain.ptx
var PTX []byte

// Chain constants, as float32 bit patterns in the PTX.
const (
	chainScale = float32(1e-3)
	chainMul   = float32(0.999)
	chainAdd   = float32(0.001)
)

// ChainStart is element i's value before the first step.
func ChainStart(i int) float32 { return float32(i&1023) * chainScale }

// ChainClosedForm is the exact value of the chain after steps steps in real
// arithmetic: x converges to 1 as 1 + (x0-1)*0.999^steps.
func ChainClosedForm(i, steps int) float64 {
	x0 := float64(ChainStart(i))
	return 1 + (x0-1)*math.Pow(float64(chainMul), float64(steps))
}

// ChainTolerance bounds the float32 rounding of steps dependent FMAs around
// the closed form (each step's error is damped by 0.999, so it saturates).
func ChainTolerance(steps int) float64 { return 1e-6 * float64(min(steps, 2000)+4) }

// ChainValue is the float32 computation the kernel does, step by step (fmaf
// rounds once: the product of two float32 is exact in float64, and the sum
// is rounded to float32 from the float64 FMA; double rounding can differ in
// the last bit, which ChainTolerance covers).
func ChainValue(i, steps int) float32 {
	x := ChainStart(i)
	for s := 0; s < steps; s++ {
		x = float32(math.FMA(float64(x), float64(chainMul), float64(chainAdd)))
	}
	return x
}

// CheckChain verifies out (float32 little-endian) against the closed form
// and returns the first bad index.
func CheckChain(out []byte, steps int) error {
	tol := ChainTolerance(steps)
	for i := 0; i < len(out)/4; i++ {
		got := math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
		want := ChainClosedForm(i, steps)
		if d := math.Abs(float64(got) - want); d > tol || math.IsNaN(float64(got)) {
			return fmt.Errorf("chain: element %d after %d steps is %.9g, closed form %.9g (|diff| %.3g > %.3g)", i, steps, got, want, d, tol)
		}
	}
	return nil
}

// RegisterFake gives the fake driver Go bodies for the kernels, so that fake
// runs compute real results (slowly: keep sizes small).
func RegisterFake(d *fake.Driver) {
	d.RegisterKernel("chain", func(mem *fake.Memory, grid, block cuda.Dim3, args []byte, offs []uint32) error {
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
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(ChainValue(i, steps)))
		}
		return nil
	})
	d.RegisterKernel("spin", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error { return nil })
}
