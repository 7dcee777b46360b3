package fcsp

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// smidPTX: each block writes the SM it ran on (%smid) at out[blockIdx.x].
const smidPTX = `.version 8.0
.target sm_80
.address_size 64
.visible .entry smid(.param .u64 out) {
 .reg .u32 %r<4>; .reg .u64 %rd<5>;
 ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd2, %rd1;
 mov.u32 %r1, %smid; mov.u32 %r2, %ctaid.x; mul.wide.u32 %rd3, %r2, 4;
 add.s64 %rd4, %rd2, %rd3; st.global.u32 [%rd4], %r1; ret; }
`

// Concurrent Dos of one partitioned tenant each hold a green context of
// their own (a slot), all built over the tenant's SMs: blocks launched on
// each Do's current context (the legacy NULL stream of that context, which
// names no SDK stream) ran on the tenant's SMs only, never the
// neighbour's, with 8 Dos in flight at once.
func TestGPUConcurrentDosStayOnTheirSMs(t *testing.T) {
	p := openGPU(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithRestOfSMs())
	require.NoError(t, err)
	fns := map[*Tenant]*Function{}
	for _, tn := range []*Tenant{a, b} {
		mod, err := tn.LoadModule([]byte(smidPTX))
		require.NoError(t, err)
		fns[tn], err = mod.Function("smid")
		require.NoError(t, err)
	}
	smsOf := func(tn *Tenant, viaDo bool) map[uint32]bool {
		fn := fns[tn]
		const blocks = 1024
		ctx := context.Background()
		buf, err := tn.Alloc(ctx, 4*blocks)
		require.NoError(t, err)
		defer func() { require.NoError(t, tn.Free(buf)) }()
		var args Args
		args.Ptr(buf)
		if viaDo {
			require.NoError(t, tn.Do(ctx, func(cur Current) error {
				// Stream 0 with no context pushed: the thread's current
				// context, the slot this Do holds.
				if err := p.drv.LaunchKernel(0, fn.k.H, cuda.Dim3{X: blocks, Y: 1, Z: 1}, cuda.Dim3{X: 32, Y: 1, Z: 1}, 0, 0, &args.a); err != nil {
					return err
				}
				return p.drv.StreamSynchronize(0, 0) // the NULL stream of the current context
			}))
		} else {
			require.NoError(t, tn.Stream().Launch(ctx, fn, Dim3{X: blocks, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args))
			require.NoError(t, tn.Stream().Synchronize())
		}
		return smsIn(t, tn, buf, blocks)
	}
	theirs := smsOf(b, false)
	require.Len(t, theirs, b.SMs())
	var mu sync.Mutex
	all := map[uint32]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got := smsOf(a, true)
			mu.Lock()
			defer mu.Unlock()
			for sm := range got {
				all[sm] = true
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, len(all), a.SMs(), "blocks of a's Dos ran on more SMs than a holds")
	for sm := range all {
		require.False(t, theirs[sm], "SM %d ran both tenants' work", sm)
	}
	made := a.c.partition().Slots()
	t.Logf("8 concurrent Dos: %d green contexts made, blocks on %d SMs (a holds %d, b %d), none of b's", made, len(all), a.SMs(), b.SMs())
}

// Issue 28: a CUDA graph runs on the SMs it was captured for. Captured
// while the interactive tenant held 32 SMs and launched after it shrank to
// 8 (the neighbour grown to 124), it ran on 32 SMs, 24 of them the
// neighbour's; instantiating it again in the new layout did not move it
// (run M). So it is refused (ErrStaleGraph), and one captured again after
// the Reshape runs on the tenant's 8 SMs only, none of the neighbour's.
func TestGPUGraphFollowsAReshape(t *testing.T) {
	p := openGPU(t)
	ctx := context.Background()
	a, err := p.NewTenant("a", WithSMs(8), WithReshapeSizes(32))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithRestOfSMs(), WithReshapeSizes(100))
	require.NoError(t, err)
	require.NoError(t, b.Reshape(ctx, 100))
	require.NoError(t, a.Reshape(ctx, 32))
	const blocks = 1024
	kernel := func(tn *Tenant) (*Function, DevicePtr) {
		mod, err := tn.LoadModule([]byte(smidPTX))
		require.NoError(t, err)
		fn, err := mod.Function("smid")
		require.NoError(t, err)
		buf, err := tn.Alloc(ctx, 4*blocks)
		require.NoError(t, err)
		return fn, buf
	}
	read := func(tn *Tenant, buf DevicePtr) map[uint32]bool {
		require.NoError(t, tn.Stream().Synchronize())
		return smsIn(t, tn, buf, blocks)
	}
	fa, bufA := kernel(a)
	var args Args
	args.Ptr(bufA)
	s := a.Stream()
	g, err := s.Capture(ctx, func() error {
		return s.Launch(ctx, fa, Dim3{X: blocks, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args)
	})
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, s.LaunchGraph(ctx, x))
	at32 := read(a, bufA)
	require.Len(t, at32, 32, "the graph instantiated at 32 SMs")

	require.NoError(t, a.Reshape(ctx, 8))
	require.NoError(t, b.Reshape(ctx, 124))
	fb, bufB := kernel(b)
	var argsB Args
	argsB.Ptr(bufB)
	require.NoError(t, b.Stream().Launch(ctx, fb, Dim3{X: blocks, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &argsB))
	theirs := read(b, bufB)
	require.Len(t, theirs, 124)

	require.ErrorIs(t, s.LaunchGraph(ctx, x), ErrStaleGraph, "a graph captured at 32 SMs, launched at 8")
	g2, err := s.Capture(ctx, func() error {
		return s.Launch(ctx, fa, Dim3{X: blocks, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args)
	})
	require.NoError(t, err)
	x2, err := g2.Instantiate()
	require.NoError(t, err)
	require.NoError(t, s.LaunchGraph(ctx, x2))
	after := read(a, bufA)
	require.LessOrEqual(t, len(after), 8, "the graph captured after the Reshape ran on more SMs than the tenant holds")
	for sm := range after {
		require.False(t, theirs[sm], "the graph ran on SM %d, the neighbour's", sm)
	}
	t.Logf("graph captured at 32 SMs (%d seen) refused after shrinking to %d; captured again: %d SMs, none of the neighbour's %d", len(at32), a.SMs(), len(after), len(theirs))
	require.NoError(t, errors.Join(x.Close(), g.Close(), x2.Close(), g2.Close(), a.Free(bufA), b.Free(bufB)))
}

// smsIn reads the SM ids the smid kernel wrote for blocks blocks at buf.
func smsIn(t *testing.T, tn *Tenant, buf DevicePtr, blocks int) map[uint32]bool {
	t.Helper()
	out := make([]byte, 4*blocks)
	require.NoError(t, tn.CopyFromDevice(out, buf))
	sms := map[uint32]bool{}
	for i := range blocks {
		sms[binary.LittleEndian.Uint32(out[4*i:])] = true
	}
	return sms
}
