package kernels

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
)

// TriadPTX is triad.ptx: the entry "triad" (triad(float *a, const float
// *b, const float *c, float s, unsigned n): a[i] = b[i] + s*c[i], the
// STREAM triad), a memory-bound kernel for bandwidth measurements:
//
//	mod, err := tenant.LoadModule(kernels.TriadPTX)
//	fn, err := mod.Function("triad")
//	fn.SetBytesMoved(kernels.TriadBytes(n))
//	var args fcsp.Args
//	args.Ptr(a).Ptr(b).Ptr(c).Float32(s).Uint32(uint32(n))
//	err = stream.Launch(ctx, fn, fcsp.Dim3{X: uint32(8 * tenant.SMs()), Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}, 0, &args)
//
// It loops over n with the grid's stride, so a grid sized to the SMs
// covers any n.
//
//go:embed triad.ptx
var TriadPTX []byte

// TriadBytes is the device memory one triad over n elements reads and
// writes: b and c read, a written, 4 bytes each.
func TriadBytes(n int) uint64 { return 12 * uint64(n) }

// TriadValue is element i of a after a triad: b + s*c, rounded once as the
// kernel's FMA does (the float64 FMA of float32 operands, then rounded to
// float32, can differ from it in the last bit; CheckTriad allows that).
func TriadValue(s, b, c float32) float32 {
	return float32(math.FMA(float64(s), float64(c), float64(b)))
}

// CheckTriad verifies a against b + s*c (float32 little-endian, equal
// lengths) and returns the first bad index.
func CheckTriad(a, b, c []byte, s float32) error {
	if len(a) != len(b) || len(a) != len(c) {
		return fmt.Errorf("triad: arrays of %d, %d and %d bytes", len(a), len(b), len(c))
	}
	for i := 0; i+4 <= len(a); i += 4 {
		got := math.Float32frombits(binary.LittleEndian.Uint32(a[i:]))
		want := TriadValue(s, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])), math.Float32frombits(binary.LittleEndian.Uint32(c[i:])))
		if d := math.Abs(float64(got) - float64(want)); d > math.Abs(float64(want))*1e-6 || math.IsNaN(float64(got)) != math.IsNaN(float64(want)) {
			return fmt.Errorf("triad: element %d is %.9g, want %.9g", i/4, got, want)
		}
	}
	return nil
}
