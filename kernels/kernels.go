// Package kernels is a first kernel for fcsp-go: the PTX of the day-94 chain
// (and a spin kernel), with a Go model of what it computes, so that a
// program can load, launch and check real GPU work without a CUDA toolkit:
//
//	mod, err := tenant.LoadModule(kernels.ChainPTX)
//	fn, err := mod.Function("chain")    // chain(float *out, int n, int steps)
//	var args fcsp.Args
//	args.Ptr(buf).Int32(n).Int32(steps) // buf: at least 4*n bytes
//	err = tenant.Stream().Launch(ctx, fn, fcsp.Dim3{X: (n + 255) / 256, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &args)
//	err = tenant.Stream().Synchronize()
//	err = tenant.CopyFromDevice(out, buf)
//	err = kernels.CheckChain(out, steps)
//
// Thread i computes steps dependent fused multiply-adds,
// x = x*0.999 + 0.001 from x = (i mod 1024)*1e-3, and stores x in out[i]:
// ChainValue is that computation in Go, ChainClosedForm its exact limit,
// CheckChain the comparison. "spin" (spin(uint64 cycles)) busy-waits on the
// SM clock, for timing and throttling tests; spin(SpinForever) never ends. chain.cu is the source;
// chain.ptx is nvcc 13.0's output (the command is in chain.cu), PTX ISA for
// compute_80, so the driver JIT-compiles it for any GPU from Ampere on.
//
// The simulator (package fcsptest) runs both kernels through these models.
package kernels

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
)

// ChainPTX is chain.ptx: the entries "chain" (the day-94 dependent FMA
// chain) and "spin" (busy-wait a number of clock cycles), for
// Tenant.LoadModule.
//
//go:embed chain.ptx
var ChainPTX []byte

// SpinForever is the cycle count of a spin that never ends: 2^64 - 1 SM
// clock cycles, centuries at any clock rate, so on a GPU the kernel ends
// only with its process or a reset of its context. It is the stalled
// tenant of a test (a spin on a flag nobody sets): the simulator models it
// as a kernel that holds its stream until the test releases it
// (fake.Driver.ReleaseSpins), and any other count as one that ends at once.
const SpinForever = math.MaxUint64

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
