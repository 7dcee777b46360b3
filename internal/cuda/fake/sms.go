package fake

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Which SMs a context may run on. Every SM resource the fake hands out
// names its SMs (a set kept in the padding the real driver keeps for
// itself), a split gives each group consecutive SMs of its input and the
// remainder what is left, a descriptor and the green context made from it
// hold the union of its resources, and the primary context holds every SM.
// A kernel then runs on the SMs of the context of the stream it is queued
// on (an executable graph: of the context it was instantiated in), as
// measured on the H200 (docs/CONTEXTS.md). The fake's model of the %smid
// probe (SMIDKernel) writes those SMs, so that a CPU test sees where work
// would run.

// smSet is a set of SM ids, up to 256.
type smSet [4]uint64

const offSMs = 24 // 32 bytes of the resource's padding: 24..56

func allSMs(n uint32) smSet {
	var s smSet
	for i := range n {
		s.add(int(i))
	}
	return s
}

func (s *smSet) add(i int)     { s[i/64] |= 1 << (i % 64) }
func (s smSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }
func (s smSet) union(o smSet) smSet {
	for i := range s {
		s[i] |= o[i]
	}
	return s
}

func (s smSet) count() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// list is the set's ids, ascending.
func (s smSet) list() []int {
	out := make([]int, 0, s.count())
	for i := range 256 {
		if s.has(i) {
			out = append(out, i)
		}
	}
	return out
}

func resourceSMs(r *cuda.DevResource) smSet {
	var s smSet
	for i := range s {
		s[i] = binary.LittleEndian.Uint64(r.Raw[offSMs+8*i:])
	}
	return s
}

func setResourceSMs(r *cuda.DevResource, s smSet) {
	for i := range s {
		binary.LittleEndian.PutUint64(r.Raw[offSMs+8*i:], s[i])
	}
}

// ctxSMs is the SMs context c may run on: its green context's, or every
// SM for the primary context and a context of cuCtxCreate. The caller
// holds d.mu.
func (d *Driver) ctxSMs(c cuda.Context) smSet {
	if x := d.contexts[c]; x != nil && x.green != nil {
		return x.green.set
	}
	return allSMs(d.spec.SMs)
}

// streamSMs is the SMs work queued on s runs on (the NULL stream: the
// primary context's). The caller holds d.mu.
func (d *Driver) streamSMs(s cuda.Stream) smSet {
	if st := d.streams[s]; st != nil {
		return d.ctxSMs(st.ctx)
	}
	return allSMs(d.spec.SMs)
}

// StreamSMs lists the SMs a kernel queued on s would run on, ascending.
func (d *Driver) StreamSMs(s cuda.Stream) []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.streamSMs(s).list()
}

// SMIDKernel is the name of the kernel the fake runs as a %smid probe:
// smid(u32 *out, ...) writes, for each block b, the SM block b ran on at
// out[b]. Blocks are dealt round-robin over the SMs of the launch's
// context, so a grid of at least as many blocks as the device has SMs
// names every SM the context may use.
const SMIDKernel = "smid"

// smid is the probe's body over the SMs sms.
func (d *Driver) smid(sms smSet) KernelFunc {
	ids := sms.list()
	return func(mem *Memory, grid, _ cuda.Dim3, args []byte, offs []uint32) error {
		if len(offs) < 1 || len(ids) == 0 {
			return fmt.Errorf("%s takes the output pointer first", SMIDKernel)
		}
		out := cuda.DevicePtr(binary.LittleEndian.Uint64(args[offs[0]:]))
		n := int(grid.Count())
		buf, ok := mem.Slice(out, uint64(4*n))
		if !ok {
			return fmt.Errorf("%s: output out of bounds", SMIDKernel)
		}
		for b := range n {
			binary.LittleEndian.PutUint32(buf[4*b:], uint32(ids[b%len(ids)]))
		}
		return nil
	}
}
