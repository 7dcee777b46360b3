package fcsp

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// faultSet is three tenants of every kind: a partition, a partition with a
// pool, and one on the shared SMs with a rate limit.
type faultSet struct {
	names   []string
	tenants []*Tenant
	fns     []*Function
}

func newFaultSet(t testing.TB, p *Pool) *faultSet {
	t.Helper()
	fs := &faultSet{names: []string{"a", "b", "c"}}
	opts := [][]TenantOption{
		{WithSMs(16), WithMemoryQuota(64 << 20)},
		{WithSMs(16), WithMemoryQuota(64 << 20), WithMemoryPool(0)},
		{WithMemoryQuota(64 << 20), WithSMLimit(0.5)},
	}
	for i, name := range fs.names {
		tn, err := p.NewTenant(name, opts[i]...)
		require.NoError(t, err)
		mod, err := tn.LoadModule(kernels.ChainPTX)
		require.NoError(t, err)
		fn, err := mod.Function("chain")
		require.NoError(t, err)
		fs.tenants, fs.fns = append(fs.tenants, tn), append(fs.fns, fn)
	}
	return fs
}

// chainOn runs the chain kernel on s into a fresh buffer, checks it, and
// frees the buffer.
func chainOn(ctx context.Context, tn *Tenant, s *Stream, fn *Function, n, steps int) error {
	buf, err := tn.AllocAsync(s, uint64(4*n))
	if err != nil {
		return err
	}
	var a Args
	a.Ptr(buf).Int32(int32(n)).Int32(int32(steps))
	err = s.Launch(ctx, fn, Dim3{X: uint32((n + 255) / 256), Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &a)
	if err == nil {
		err = s.Synchronize()
	}
	if err == nil {
		out := make([]byte, 4*n)
		if err = tn.CopyFromDevice(out, buf); err == nil {
			err = kernels.CheckChain(out, steps)
		}
	}
	return errors.Join(err, tn.FreeAsync(s, buf))
}

// faultOn launches the chain kernel with an address no allocation holds,
// as a buggy request would.
func faultOn(ctx context.Context, s *Stream, fn *Function) error {
	var a Args
	a.Ptr(0x10).Int32(1024).Int32(4)
	err := s.Launch(ctx, fn, Dim3{X: 4, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &a)
	if err == nil {
		err = s.Synchronize() // on a GPU the fault shows at the next synchronisation
	}
	return err
}

func TestDeviceLostThenReset(t *testing.T) {
	ctx := context.Background()
	p, drv := openSim(t, WithPrewarm(8))
	drv.SetResettableFaults(true) // the in-process path; the H200 keeps the fault (TestStickyFaultNeedsRestart)
	fs := newFaultSet(t, p)
	a, b := fs.tenants[0], fs.tenants[1]
	for i, tn := range fs.tenants {
		require.NoError(t, chainOn(ctx, tn, tn.Stream(), fs.fns[i], 1024, 16))
	}
	extra, err := b.NewStream(ClassAttention)
	require.NoError(t, err)
	require.NoError(t, chainOn(ctx, b, extra, fs.fns[1], 1024, 16))
	held := make([]DevicePtr, 3)
	for i, tn := range fs.tenants {
		held[i], err = tn.Alloc(ctx, 1<<20)
		require.NoError(t, err)
	}
	cached, err := b.Alloc(ctx, 4096) // freed onto b's free list: the next one needs no driver call
	require.NoError(t, err)
	require.NoError(t, b.Free(cached))
	ev, err := a.NewEvent()
	require.NoError(t, err)
	freeSMs, used := p.FreeSMs(), p.MemoryUsed()
	var kept uint64
	for _, tn := range fs.tenants {
		kept += tn.Stats().MemoryCached
	}
	require.Equal(t, uint64(3<<20)+kept, used) // cached blocks count against the device (issue 20)

	// Tenant a's kernel writes where no allocation is.
	err = faultOn(ctx, a.Stream(), fs.fns[0])
	require.ErrorIs(t, err, ErrDeviceLost)
	var lost *DeviceLostError
	require.ErrorAs(t, err, &lost)
	var ce *CUDAError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, cuda.ErrorIllegalAddress, ce.Code)
	require.Equal(t, "cuLaunchKernel", ce.Op)
	require.Equal(t, "a", lost.Tenant)
	require.Equal(t, a.Stream().Handle(), lost.Stream)
	require.Contains(t, err.Error(), `first seen by tenant "a" on stream`)
	require.Equal(t, lost, p.Health().Lost)
	require.False(t, p.Health().Healthy())

	// Every tenant now gets the same error, without a driver call.
	before := map[string]int{}
	ops := []string{"cuLaunchKernel", "cuMemAlloc_v2", "cuMemAllocFromPoolAsync", "cuStreamSynchronize", "cuMemcpyHtoD_v2", "cuMemGetInfo_v2", "cuModuleLoadData", "cuEventRecord"}
	for _, op := range ops {
		before[op] = drv.Calls(op)
	}
	for i, tn := range fs.tenants {
		calls := map[string]error{}
		_, calls["Alloc"] = tn.Alloc(ctx, 4096) // b's comes from its free list
		calls["Launch"] = faultOn(ctx, tn.Stream(), fs.fns[i])
		calls["Synchronize"] = tn.Stream().Synchronize()
		calls["Free"] = tn.Free(held[i])
		calls["CopyToDevice"] = tn.CopyToDevice(held[i], []byte{1})
		_, _, calls["MemGetInfo"] = tn.MemGetInfo()
		_, calls["LoadModule"] = tn.LoadModule(kernels.ChainPTX)
		_, calls["NewStream"] = tn.NewStream(ClassDefault)
		for what, err := range calls {
			require.ErrorIs(t, err, ErrDeviceLost, "tenant %s: %s", fs.names[i], what)
			require.ErrorAs(t, err, &lost)
			require.Equal(t, "a", lost.Tenant, "the first sighting is kept")
		}
	}
	require.ErrorIs(t, ev.Record(a.Stream()), ErrDeviceLost)
	_, err = p.NewTenant("late", WithSMs(8))
	require.ErrorIs(t, err, ErrDeviceLost)
	for _, op := range ops {
		require.Equal(t, before[op], drv.Calls(op), "%s reached the driver of a lost pool", op)
	}
	require.Equal(t, used, p.MemoryUsed(), "a failed Free keeps its accounting")

	// The way back.
	require.NoError(t, p.Reset(ctx))
	h := p.Health()
	require.True(t, h.Healthy())
	require.Equal(t, 1, h.Resets)
	require.Positive(t, h.LastReset)
	require.Equal(t, 1, drv.Resets())
	require.Equal(t, cuda.Success, drv.Sticky(0))
	require.Zero(t, p.MemoryUsed(), "the allocations died with the context: no quota is held")
	require.Equal(t, freeSMs, p.FreeSMs())
	require.Equal(t, []string{"a", "b", "c"}, p.Tenants())
	require.Equal(t, 16, a.SMs())
	require.Equal(t, 16, b.SMs())
	require.Equal(t, 3, drv.Live().GreenCtxs, "a, b, the prewarmed spare, and nothing left over")
	for i, tn := range fs.tenants {
		require.Zero(t, tn.Stats().MemoryUsed)
		require.ErrorIs(t, tn.Free(held[i]), ErrStale, "tenant %s", fs.names[i])
		require.ErrorIs(t, tn.Free(held[i]), ErrUnknownPointer, "ErrStale is said once")
		require.NoError(t, chainOn(ctx, tn, tn.Stream(), fs.fns[i], 1024, 16), "tenant %s, the function from before", fs.names[i])
		free, total, err := tn.MemGetInfo()
		require.NoError(t, err)
		require.Equal(t, uint64(64<<20), total)
		require.Equal(t, uint64(64<<20)-tn.Stats().MemoryCached, free, "nothing held but the free lists")
	}
	require.NoError(t, chainOn(ctx, b, extra, fs.fns[1], 1024, 16), "a stream from NewStream is made again")
	require.ErrorIs(t, ev.Record(a.Stream()), ErrStale)
	require.ErrorIs(t, ev.Close(), ErrStale)
	late, err := p.NewTenant("late", WithSMs(8))
	require.NoError(t, err, "the spare partition was rebuilt too")
	require.NoError(t, late.Close())

	for _, tn := range fs.tenants {
		require.NoError(t, tn.Close())
	}
	live := drv.Live()
	require.Zero(t, live.Bytes)
	require.Zero(t, live.Modules)
	require.Equal(t, 1, live.GreenCtxs, "only the spare")
}

func TestResetOfAHealthyPool(t *testing.T) {
	ctx := context.Background()
	p, _ := openSim(t)
	fs := newFaultSet(t, p)
	require.NoError(t, p.Reset(ctx))
	require.NoError(t, p.Reset(ctx))
	for i, tn := range fs.tenants {
		require.NoError(t, chainOn(ctx, tn, tn.Stream(), fs.fns[i], 256, 8))
	}
	require.Equal(t, 2, p.Health().Resets)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, p.Reset(cancelled), context.Canceled)
	require.NoError(t, p.Close())
	require.ErrorIs(t, p.Reset(ctx), ErrClosed)
}

func TestResetFailureLeavesThePoolLost(t *testing.T) {
	ctx := context.Background()
	p, drv := openSim(t)
	drv.SetResettableFaults(true)
	fs := newFaultSet(t, p)
	drv.InjectFault(0, cuda.ErrorHardwareStackError)
	require.ErrorIs(t, fs.tenants[0].Stream().Synchronize(), ErrDeviceLost)
	drv.FailNext("cuDevicePrimaryCtxReset_v2", cuda.ErrorUnknown)
	err := p.Reset(ctx)
	require.ErrorIs(t, err, cuda.ErrorUnknown)
	require.ErrorIs(t, err, ErrDeviceLost)
	require.False(t, p.Health().NeedsRestart, "a reset that failed for another reason may be tried again")
	_, err = fs.tenants[1].Alloc(ctx, 1)
	require.ErrorIs(t, err, ErrDeviceLost)
	require.Contains(t, err.Error(), "Pool.Reset failed")
	require.NoError(t, p.Reset(ctx))
	require.NoError(t, chainOn(ctx, fs.tenants[1], fs.tenants[1].Stream(), fs.fns[1], 256, 8))
}

// Reset, Close and calls all at once: every call either works or fails with
// one of the documented errors, and the accounting ends at zero.
func TestResetRacesCallsAndClose(t *testing.T) {
	ctx := context.Background()
	p, drv := openSim(t)
	drv.SetResettableFaults(true)
	fs := newFaultSet(t, p)
	var stop atomic.Bool
	var wg sync.WaitGroup
	bad := make(chan error, 64)
	for i, tn := range fs.tenants {
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; !stop.Load() && n < 400; n++ {
					err := chainOn(ctx, tn, tn.Stream(), fs.fns[i], 64, 2)
					if n%7 == 3 {
						err = errors.Join(err, faultOn(ctx, tn.Stream(), fs.fns[i]))
					}
					if err != nil && !errors.Is(err, ErrDeviceLost) && !errors.Is(err, ErrClosed) &&
						!errors.Is(err, ErrStale) && !errors.Is(err, ErrUnknownPointer) {
						bad <- err
						return
					}
				}
			}()
		}
	}
	closed := make(chan error, 1)
	for r := 0; r < 6; r++ {
		drv.InjectFault(0, cuda.ErrorIllegalAddress)
		_ = fs.tenants[2].Stream().Synchronize()
		if r == 3 { // tenant a's Close races this Reset
			go func() { closed <- fs.tenants[0].Close() }()
		}
		require.NoError(t, p.Reset(ctx))
	}
	require.NoError(t, <-closed)
	stop.Store(true)
	wg.Wait()
	close(bad)
	for err := range bad {
		t.Error(err)
	}
	if !p.Health().Healthy() {
		require.NoError(t, p.Reset(ctx))
	}
	for i, tn := range fs.tenants[1:] {
		require.NoError(t, chainOn(ctx, tn, tn.Stream(), fs.fns[i+1], 64, 2))
		require.Zero(t, tn.Stats().MemoryUsed)
	}
	var cached uint64
	for _, tn := range fs.tenants[1:] {
		cached += tn.Stats().MemoryCached
	}
	require.Equal(t, cached, p.MemoryUsed(), "the pool counts the tenants' cached blocks and nothing else")
	for _, tn := range fs.tenants[1:] {
		require.NoError(t, tn.Close())
	}
	live := drv.Live()
	require.Zero(t, live.Bytes, "nothing leaked in the fake")
	require.Zero(t, live.GreenCtxs)
	require.Zero(t, live.Streams)
	require.Zero(t, live.Modules)
}

// A lost pool can still be closed, tenant by tenant or whole: what the
// driver says about freeing a dead context's resources is not the caller's
// error.
func TestLostPoolCloses(t *testing.T) {
	ctx := context.Background()
	p, drv := openSim(t)
	fs := newFaultSet(t, p)
	extra, err := fs.tenants[1].NewStream(ClassDefault)
	require.NoError(t, err)
	_, err = fs.tenants[0].Alloc(ctx, 1<<20)
	require.NoError(t, err)
	drv.InjectFault(0, cuda.ErrorLaunchFailed)
	require.ErrorIs(t, fs.tenants[2].Stream().Synchronize(), ErrDeviceLost)
	require.ErrorIs(t, extra.Close(), ErrDeviceLost, "the stream stays for Reset")
	require.NoError(t, fs.tenants[0].Close())
	require.ErrorIs(t, fs.tenants[0].Stream().Synchronize(), ErrClosed, "closed wins over lost")
	require.NoError(t, p.Close())
	require.NoError(t, fs.tenants[1].Close())
}

// An adopted stream's handle died with the reset; the SDK forgets it.
func TestResetForgetsAdoptedStreams(t *testing.T) {
	ctx := context.Background()
	p, _ := openSim(t)
	fs := newFaultSet(t, p)
	c := fs.tenants[2]
	own, err := c.NewStream(ClassDefault)
	require.NoError(t, err)
	adopted, err := c.Adopt(own.Handle(), ClassNCCL)
	require.NoError(t, err)
	require.NoError(t, adopted.Synchronize())
	require.NoError(t, p.Reset(ctx))
	require.ErrorIs(t, adopted.Synchronize(), ErrClosed)
	require.NoError(t, own.Synchronize(), "a stream made by NewStream is made again")
	require.Equal(t, 2, c.Stats().Streams)
}

// A cleanup that is the first to meet a sticky fault loses the device, as
// any call would, and is forgiven: a partitioned tenant's Close tears its
// partition down through the raw driver, which the pool does not watch.
// TestResetRacesCallsAndClose failed on this about once in 60 -race runs
// (a fault injected after the Close's watched calls and before its
// partition's: the Close returned cuStreamSynchronize's 700).
func TestCleanupFirstToMeetAFaultLosesTheDevice(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	raw := errors.Join(nil, &cuda.Error{Op: "cuStreamSynchronize", Code: cuda.ErrorIllegalAddress},
		&cuda.Error{Op: "cuStreamDestroy_v2", Code: cuda.ErrorIllegalAddress})
	require.NoError(t, p.forgive(raw))
	require.False(t, p.Health().Healthy())
	_, err = tn.Alloc(context.Background(), 1)
	require.ErrorIs(t, err, ErrDeviceLost)
	// A cleanup error that is not a fault is not forgiven on a healthy pool.
	q, _ := openSim(t)
	require.Error(t, q.forgive(&cuda.Error{Op: "cuStreamDestroy_v2", Code: cuda.ErrorInvalidHandle}))
	require.True(t, q.Health().Healthy())
}
