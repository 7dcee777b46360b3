package main

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// smidPTX is a hand-written kernel: smid(u32 *out, u64 cycles) has each
// block wait cycles SM clocks (so that the blocks spread over the SMs the
// class may use rather than all landing on the first free one) and thread 0
// write the block's %smid to out[blockIdx.x].
var smidPTX = []byte(`
.version 7.0
.target sm_80
.address_size 64

.visible .entry smid(
	.param .u64 smid_param_0,
	.param .u64 smid_param_1
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<9>;

	ld.param.u64 %rd1, [smid_param_0];
	ld.param.u64 %rd2, [smid_param_1];
	mov.u64 %rd3, %clock64;
$Lwait:
	mov.u64 %rd4, %clock64;
	sub.s64 %rd5, %rd4, %rd3;
	setp.lt.s64 %p1, %rd5, %rd2;
	@%p1 bra $Lwait;
	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p2, %r1, 0;
	@%p2 bra $Ldone;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %smid;
	cvta.to.global.u64 %rd6, %rd1;
	mul.wide.u32 %rd7, %r2, 4;
	add.s64 %rd8, %rd6, %rd7;
	st.global.u32 [%rd8], %r3;
$Ldone:
	ret;
}
`)

// probeCycles is how long each probe block waits: about a microsecond on
// the H200, too short to matter to a neighbour's latency, long enough
// that the grid spreads.
const probeCycles = 2000

// probe launches smid on its own stream of one tenant and collects the SMs
// its blocks ran on. A tenant confined to a partition must only ever
// report that partition's SMs, however busy the SDK's other callers are.
type probe struct {
	t      *fcsp.Tenant
	s      *fcsp.Stream
	fn     *fcsp.Function
	buf    fcsp.DevicePtr
	blocks int
	args   fcsp.Args
	host   []byte

	mu          sync.Mutex
	seen        map[int]bool
	launches    int
	notComputed bool // the simulator has no model of smid: no SMs known
}

func newProbe(ctx context.Context, t *fcsp.Tenant, deviceSMs int) (*probe, error) {
	mod, err := t.LoadModule(smidPTX)
	if err != nil {
		return nil, err
	}
	fn, err := mod.Function("smid")
	if err != nil {
		return nil, err
	}
	s, err := t.NewStream(fcsp.ClassDefault)
	if err != nil {
		return nil, err
	}
	// Four blocks per SM of the whole device: more than any partition can
	// hold at once, so that every SM the class may use gets some.
	p := &probe{t: t, s: s, fn: fn, blocks: 4 * max(deviceSMs, 1), seen: map[int]bool{}}
	p.host = make([]byte, 4*p.blocks)
	if p.buf, err = t.Alloc(ctx, uint64(len(p.host))); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	p.args.Ptr(p.buf).Uint64(probeCycles)
	return p, nil
}

// once launches the kernel, waits for it and records the SMs it ran on.
func (p *probe) once(ctx context.Context) error {
	// Fill with a value no SM has, so that a block that did not write is
	// not mistaken for SM 0.
	if err := p.s.MemsetD32(p.buf, 0xffffffff, uint64(p.blocks)); err != nil {
		return err
	}
	err := p.s.Launch(ctx, p.fn, fcsp.Dim3{X: uint32(p.blocks), Y: 1, Z: 1}, fcsp.Dim3{X: 32, Y: 1, Z: 1}, 0, &p.args)
	if errors.Is(err, fcsp.ErrNotComputed) {
		p.mu.Lock()
		p.notComputed = true
		p.launches++
		p.mu.Unlock()
		return p.s.Synchronize()
	}
	if err != nil {
		return err
	}
	if err := p.s.Synchronize(); err != nil {
		return err
	}
	if err := p.t.CopyFromDevice(p.host, p.buf); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.launches++
	for i := range p.blocks {
		if v := binary.LittleEndian.Uint32(p.host[4*i:]); v != 0xffffffff {
			p.seen[int(v)] = true
		}
	}
	return nil
}

// take returns the SMs seen since the last take and forgets them.
func (p *probe) take() (sms []int, launches int, notComputed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sm := range p.seen {
		sms = append(sms, sm)
	}
	slices.Sort(sms)
	launches, notComputed = p.launches, p.notComputed
	p.seen, p.launches = map[int]bool{}, 0
	return sms, launches, notComputed
}

func (p *probe) close() error {
	return errors.Join(p.s.Synchronize(), p.t.Free(p.buf), p.s.Close())
}

// SMCheck is what the probes saw in one layout and round: the SMs each
// class's blocks ran on while the storm went on.
type SMCheck struct {
	Round       int    `json:"round"`
	Layout      string `json:"layout"`
	Interactive []int  `json:"interactive_sms_seen"`
	Batch       []int  `json:"batch_sms_seen,omitempty"`
	Overlap     []int  `json:"overlap"`
	Launches    int    `json:"probe_launches"`
	NotComputed bool   `json:"not_computed,omitempty"` // simulator: the kernel was launched, nothing written
	// MustBeDisjoint: the classes are on partitions of their own, so any
	// overlap is a failure.
	MustBeDisjoint bool `json:"must_be_disjoint"`
}

func intersect(a, b []int) []int {
	var out []int
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
