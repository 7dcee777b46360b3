package fcsp

import (
	"fmt"
	"unsafe"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// DevicePtr is a device address (a CUdeviceptr), as Tenant.Alloc returns
// it. Pass it to a kernel with Args.Ptr, to copies with
// Tenant.CopyToDevice and CopyFromDevice, and to another binding as
// uintptr(p) or uint64(p); free it with the Tenant (or Scope) that
// allocated it. Address arithmetic (p + offset) stays inside the
// allocation only if the caller keeps it there.
type DevicePtr uint64

// String formats p as a hexadecimal address.
func (p DevicePtr) String() string { return fmt.Sprintf("%#x", uint64(p)) }

// Pointer is the address as the void* a cgo call takes (device memory, not
// Go memory: the C side must not dereference it on the host). In cgo,
// C.some_library_call(p.Pointer()), which go vet accepts where
// unsafe.Pointer(uintptr(p)) is "possible misuse of unsafe.Pointer".
func (p DevicePtr) Pointer() unsafe.Pointer { return cuda.Pointer(uintptr(p)) }

// Dim3 is the shape of a launch's grid (blocks) or of a block (threads), as
// CUDA's dim3. Every dimension must be at least 1: a one-dimensional
// launch of n threads in blocks of 256 is
//
//	grid, block := fcsp.Dim3{X: (n + 255) / 256, Y: 1, Z: 1}, fcsp.Dim3{X: 256, Y: 1, Z: 1}
type Dim3 struct{ X, Y, Z uint32 }

// Count is X*Y*Z.
func (d Dim3) Count() uint64 { return uint64(d.X) * uint64(d.Y) * uint64(d.Z) }

func (d Dim3) cuda() cuda.Dim3 { return cuda.Dim3(d) }

// Args is a kernel's parameters, appended in the order of the kernel's
// signature, each with the method of its C type:
//
//	// __global__ void chain(float *out, int n, int steps)
//	var args fcsp.Args
//	args.Ptr(buf).Int32(n).Int32(steps)
//	err := stream.Launch(ctx, fn, grid, block, 0, &args)
//
// The values are copied into one flat buffer, so an Args may be reused:
// Reset and refill it for the next launch. One Args per goroutine, reused,
// keeps launches free of allocations. The zero Args has no parameters.
type Args struct{ a cuda.Args }

// Reset empties a for reuse, keeping its buffer.
func (a *Args) Reset() *Args { a.a.Reset(); return a }

// Ptr appends a device pointer parameter (T* in the kernel).
func (a *Args) Ptr(p DevicePtr) *Args { a.a.Ptr(cuda.DevicePtr(p)); return a }

// Int32 appends an int parameter.
func (a *Args) Int32(v int32) *Args { a.a.Int32(v); return a }

// Uint32 appends an unsigned int parameter.
func (a *Args) Uint32(v uint32) *Args { a.a.Uint32(v); return a }

// Uint64 appends an unsigned long long (or size_t) parameter.
func (a *Args) Uint64(v uint64) *Args { a.a.Uint64(v); return a }

// Float32 appends a float parameter.
func (a *Args) Float32(v float32) *Args { a.a.Float32(v); return a }

// Len is the number of parameters appended.
func (a *Args) Len() int { return a.a.Len() }

// SplitRow is one line of a split table: a split of the device's SMs with
// at least MinCount SMs per group made Groups groups of GroupSMs SMs each,
// with Remainder SMs left over (Pool.SplitTable).
type SplitRow struct {
	MinCount  int // what was asked
	Groups    int // how many groups the driver made
	GroupSMs  int // SMs in each group
	Remainder int // SMs left over
}
