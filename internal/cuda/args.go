package cuda

import (
	"encoding/binary"
	"math"
)

// Args packs kernel parameters into one flat, pointer-free buffer, each value
// aligned to its size. The shim builds the void*[] that cuLaunchKernel wants
// from it inside the C call, so no Go pointer is ever stored in C memory and
// a reused Args makes a launch allocation-free.
type Args struct {
	buf  []byte
	offs []uint32
}

// Reset empties a for reuse.
func (a *Args) Reset() *Args { a.buf = a.buf[:0]; a.offs = a.offs[:0]; return a }

func (a *Args) put(size int) []byte {
	for len(a.buf)%size != 0 {
		a.buf = append(a.buf, 0)
	}
	a.offs = append(a.offs, uint32(len(a.buf)))
	n := len(a.buf)
	for i := 0; i < size; i++ {
		a.buf = append(a.buf, 0)
	}
	return a.buf[n : n+size]
}

// Ptr appends a device pointer parameter.
func (a *Args) Ptr(p DevicePtr) *Args { binary.LittleEndian.PutUint64(a.put(8), uint64(p)); return a }

// Int32 appends an int parameter.
func (a *Args) Int32(v int32) *Args { binary.LittleEndian.PutUint32(a.put(4), uint32(v)); return a }

// Uint32 appends an unsigned int parameter.
func (a *Args) Uint32(v uint32) *Args { binary.LittleEndian.PutUint32(a.put(4), v); return a }

// Uint64 appends a 64-bit integer parameter.
func (a *Args) Uint64(v uint64) *Args { binary.LittleEndian.PutUint64(a.put(8), v); return a }

// Float32 appends a float parameter.
func (a *Args) Float32(v float32) *Args {
	binary.LittleEndian.PutUint32(a.put(4), math.Float32bits(v))
	return a
}

// Len is the number of parameters.
func (a *Args) Len() int { return len(a.offs) }

// Bytes and Offsets expose the packed form (for drivers).
func (a *Args) Bytes() []byte     { return a.buf }
func (a *Args) Offsets() []uint32 { return a.offs }
