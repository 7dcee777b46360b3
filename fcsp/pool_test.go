package fcsp

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// openSim opens a pool on a simulated H200 (or on the device a simulator
// option in opts gives) and closes it when the test ends. Every test of
// this package opens the simulator through it or openSimErr: package
// fcsptest, which users take, imports fcsp and cannot be used here.
func openSim(t testing.TB, opts ...Option) (*Pool, *fake.Driver) {
	t.Helper()
	checkLockOrder(t)
	p, err := openSimErr(0, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p, simFake(p)
}

// requireNoneWithin fails if ch yields within d: what it stands for (a
// call's return) is still held back.
func requireNoneWithin[T any](t testing.TB, ch <-chan T, d time.Duration, msg string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s: %v", msg, v)
	case <-time.After(d):
	}
}

// requireNoGreenHeld checks that no green context is held: every live one
// is kept by the process for reuse (internal/smpart/greens.go), as those
// let go by closed tenants and moves of the commons are.
func requireNoGreenHeld(t testing.TB, p *Pool, drv *fake.Driver) {
	t.Helper()
	require.Equal(t, p.dev.KeptGreenCtxs(), drv.Live().GreenCtxs, "green contexts held beyond those kept for reuse")
}

// openSimErr is Open of device index on a simulated H200, for tests of
// what Open refuses and for pools a test closes itself.
func openSimErr(index int, opts ...Option) (*Pool, error) {
	return Open(context.Background(), index, append([]Option{simulator(fake.H200())}, opts...)...)
}

// simulator is fcsptest.Simulator for this package's tests.
func simulator(spec fake.Spec) Option {
	return withDriver(func() cuda.Driver {
		f := fake.New(spec)
		fake.RegisterKernels(f)
		if !lockorder.Enabled() {
			return f // a benchmark run: production's calls, no second guard
		}
		return cuda.NewGuard(f, lockWatch{}) // lockorder_test.go
	}, true)
}

func TestOpenWithoutDriverSaysSo(t *testing.T) {
	if _, err := cuda.Load(); err == nil {
		t.Skip("a driver is present")
	}
	_, err := Open(context.Background(), 0)
	require.ErrorIs(t, err, ErrNoDriver)
}

func TestOpenBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		idx  int
		opts []Option
		want error
		msg  string
	}{
		{"negative index", -1, nil, ErrInvalidArgument, "want 0 or more"},
		{"missing device", 3, nil, ErrInvalidArgument, "has 1 GPU"},
		{"unit not a group size", 0, []Option{WithPartitionUnit(12)}, ErrGranularity, "groups of 8"},
		{"zero unit", 0, []Option{WithPartitionUnit(0)}, ErrInvalidArgument, "positive"},
		{"prewarm too much", 0, []Option{WithPrewarm(64, 64)}, ErrInsufficientSMs, "free"},
		{"nan dampening", 0, []Option{WithLimiterTuning(LimiterTuning{Dampening: nan()})}, ErrInvalidArgument, "(0, 1]"},
		{"negative refill", 0, []Option{WithLimiterTuning(LimiterTuning{RefillPeriod: -time.Millisecond})}, ErrInvalidArgument, "refill period -1ms"},
		{"negative penalty", 0, []Option{WithLimiterTuning(LimiterTuning{ThrottlePenalty: -0.5})}, ErrInvalidArgument, "NoThrottlePenalty"},
		{"bad env", 0, []Option{WithEnviron([]string{"CUDA_DEVICE_MEMORY_LIMIT=lots"})}, ErrInvalidArgument, "CUDA_DEVICE_MEMORY_LIMIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openSimErr(tc.idx, tc.opts...)
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

func nan() float64 { z := 0.0; return z / z }

func TestTenantPartitions(t *testing.T) {
	p, drv := openSim(t)
	require.Equal(t, 132, p.Stats().FreeSMs, "15 groups of 8 and a remainder of 12 on an H200")
	require.Equal(t, 8, p.Device().PartitionUnit, "the device's granularity by default")
	require.Equal(t, 8, p.Stats().Device.PartitionUnit, "PoolStats.Device is the same DeviceInfo")
	lat, err := p.NewTenant("interactive", WithSMs(16))
	require.NoError(t, err)
	require.Equal(t, 16, lat.SMs())
	require.True(t, lat.Stats().Partitioned)

	_, err = p.NewTenant("odd", WithSMs(12))
	require.ErrorIs(t, err, ErrGranularity)
	require.Contains(t, err.Error(), "asked for 12 SMs; this device splits in groups of 8")
	_, err = p.NewTenant("interactive")
	require.ErrorIs(t, err, ErrNameTaken)
	_, err = p.NewTenant("", WithSMs(8))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = p.NewTenant("both", WithSMs(8), WithRestOfSMs())
	require.ErrorIs(t, err, ErrInvalidArgument)

	batch, err := p.NewTenant("batch", WithRestOfSMs())
	require.NoError(t, err)
	require.Equal(t, 116, batch.SMs(), "13 groups and the remainder")
	require.Zero(t, p.Stats().FreeSMs)
	_, err = p.NewTenant("late", WithSMs(8))
	require.ErrorIs(t, err, ErrInsufficientSMs)

	// No SM is free: an unpartitioned tenant shares the rest's SMs, never
	// the sized partition's (issue 37).
	shared, err := p.NewTenant("shared")
	require.NoError(t, err)
	require.False(t, shared.Stats().Partitioned)
	require.Equal(t, 116, shared.SMs())
	require.Equal(t, []string{"batch", "interactive", "shared"}, p.Tenants())

	require.NoError(t, batch.Close())
	require.NoError(t, batch.Close(), "Close is idempotent")
	require.Equal(t, 116, p.Stats().FreeSMs, "a closed tenant's SMs return")
	_, err = batch.Alloc(context.Background(), 1)
	require.ErrorIs(t, err, ErrClosed)
	_, err = batch.NewStream(ClassDefault)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, lat.Close())
	require.NoError(t, shared.Close())
	live := drv.Live()
	requireNoGreenHeld(t, p, drv)
	require.LessOrEqual(t, live.Streams, 8, "an unpartitioned tenant's streams are kept for reuse, a few")
	require.NoError(t, p.Close())
	require.Zero(t, drv.Live().Streams, "and destroyed with the pool")
}

func TestPrewarmedPartitionsAreReused(t *testing.T) {
	p, drv := openSim(t, WithPrewarm(16, 16))
	before := drv.Calls("cuGreenCtxCreate")
	require.Equal(t, 2, before)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	require.Equal(t, before, drv.Calls("cuGreenCtxCreate"), "a prewarmed partition needs no new green context")
	extra, err := a.NewStream(ClassAttention)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	b, err := p.NewTenant("b", WithSMs(16))
	require.NoError(t, err)
	require.Equal(t, before, drv.Calls("cuGreenCtxCreate"), "a closed prewarmed tenant's partition is recycled")
	require.NoError(t, b.Close())
	require.Equal(t, 2, drv.Live().GreenCtxs)
	require.Equal(t, 2, drv.Live().Streams, "recycling keeps one stream per partition, drops the rest")
	_ = extra
}

func TestQuotaAndMemoryViews(t *testing.T) {
	p, _ := openSim(t)
	ctx := context.Background()
	a, err := p.NewTenant("a", WithMemoryQuota(1<<20))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithMemoryQuota(1<<20))
	require.NoError(t, err)

	ptr, err := a.Alloc(ctx, 1<<20)
	require.NoError(t, err)
	_, err = a.Alloc(ctx, 1)
	require.ErrorIs(t, err, ErrQuotaExceeded)
	require.Contains(t, err.Error(), "requested 1")
	free, total, err := a.MemGetInfo()
	require.NoError(t, err)
	require.Equal(t, uint64(1<<20), total, "a tenant sees its quota as the card's size")
	require.Zero(t, free)

	require.ErrorIs(t, b.Free(ptr), ErrUnknownPointer, "another tenant's pointer")
	require.Equal(t, uint64(1<<20), a.Stats().MemoryUsed)
	require.NoError(t, a.Free(ptr))
	require.ErrorIs(t, a.Free(ptr), ErrUnknownPointer, "double free")
	require.Zero(t, a.Stats().MemoryUsed)
	_, err = a.Alloc(ctx, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = a.Alloc(cctx, 1)
	require.ErrorIs(t, err, context.Canceled)
}

func TestDriverOutOfMemoryRollsTheQuotaBack(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithoutMemoryPool())
	require.NoError(t, err)
	drv.FailNext("cuMemAlloc_v2", cuda.ErrorOutOfMemory)
	_, err = a.Alloc(context.Background(), 4096)
	require.ErrorIs(t, err, ErrDeviceOutOfMemory)
	var ce *CUDAError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "cuMemAlloc_v2", ce.Op)
	require.Zero(t, a.Stats().MemoryUsed)
	require.Zero(t, p.MemoryUsed())
}

func TestCloseFreesLeaks(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithoutMemoryPool())
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, err := a.Alloc(context.Background(), 1<<20)
		require.NoError(t, err)
	}
	require.Equal(t, uint64(10<<20), drv.Live().Bytes)
	require.NoError(t, a.Close())
	require.Zero(t, drv.Live().Bytes, "Close frees what the tenant forgot")
	require.Zero(t, p.MemoryUsed())
}

func TestForgottenTenantIsReclaimed(t *testing.T) {
	p, drv := openSim(t)
	func() {
		a, err := p.NewTenant("forgotten", WithSMs(64))
		require.NoError(t, err)
		_, err = a.Alloc(context.Background(), 1<<20)
		require.NoError(t, err)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(p.Tenants()) > 0 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	require.Empty(t, p.Tenants(), "an unreachable tenant must be reclaimed")
	require.Equal(t, 132, p.Stats().FreeSMs)
	require.Zero(t, drv.Live().Bytes)
}

func TestContextEndsTenant(t *testing.T) {
	p, _ := openSim(t)
	ctx, cancel := context.WithCancel(context.Background())
	a, err := p.NewTenant("req", WithSMs(8), WithContext(ctx))
	require.NoError(t, err)
	cancel()
	require.Eventually(t, func() bool { return len(p.Tenants()) == 0 }, 2*time.Second, 5*time.Millisecond)
	_, err = a.Alloc(context.Background(), 1)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, a.Close())
}

func TestLaunchComputesOnTheFake(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	mod, err := a.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	_, err = mod.Function("nope")
	require.ErrorIs(t, err, cuda.ErrorNotFound)
	const n, steps = 1000, 50
	buf, err := a.Alloc(context.Background(), 4*n)
	require.NoError(t, err)
	var args Args
	args.Ptr(buf).Int32(n).Int32(steps)
	require.NoError(t, a.Stream().Launch(context.Background(), fn, Dim3{X: 4, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &args))
	require.NoError(t, a.Stream().Synchronize())
	out := make([]byte, 4*n)
	require.NoError(t, a.CopyFromDevice(out, buf))
	require.NoError(t, kernels.CheckChain(out, steps))
	require.Equal(t, 1, drv.StreamLaunches(cuda.Stream(a.Stream().Handle())))
	require.Equal(t, uint64(1), a.Stats().Launches)

	err = a.Stream().Launch(context.Background(), fn, Dim3{}, Dim3{X: 1, Y: 1, Z: 1}, 0, &args)
	require.ErrorIs(t, err, ErrInvalidArgument)
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	err = b.Stream().Launch(context.Background(), fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 1, Y: 1, Z: 1}, 0, &args)
	require.ErrorIs(t, err, ErrInvalidArgument, "a kernel of another tenant")
}

func TestRateLimitedLaunchesWaitAndCancel(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8), WithSMLimit(0.01))
	require.NoError(t, err)
	fn := spinKernel(t, a)
	var args Args
	args.Uint64(1)
	// A launch as large as the whole partition empties the bucket; at 1%
	// of the rate the next one must wait, and a cancelled wait launches
	// nothing.
	big := Dim3{X: 8 * 2048 / 1024, Y: 1, Z: 1}
	blk := Dim3{X: 1024, Y: 1, Z: 1}
	require.NoError(t, a.Stream().Launch(context.Background(), fn, big, blk, 0, &args))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	for i := 0; i < 100 && ctx.Err() == nil; i++ {
		err = a.Stream().Launch(ctx, fn, big, blk, 0, &args)
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	st := a.Stats()
	require.Less(t, st.Launches, uint64(100))
	require.Equal(t, 0.01, st.SMLimit)

	nccl, err := a.NewStream(ClassNCCL)
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		require.NoError(t, nccl.Launch(context.Background(), fn, big, blk, 0, &args), "NCCL streams are never throttled")
	}
	require.Equal(t, uint64(100), nccl.Launches())
}

func TestConcurrentTenantsAndAllocations(t *testing.T) {
	p, drv := openSim(t)
	together(t, 8, func(i int) error {
		tn, err := p.NewTenant(strings.Repeat("t", i+1), WithSMs(8), WithMemoryQuota(8<<20))
		if err != nil {
			return err
		}
		defer tn.Close()
		for k := 0; k < 200; k++ {
			ptr, err := tn.Alloc(context.Background(), uint64(1+k%4)<<20)
			if errors.Is(err, ErrQuotaExceeded) {
				continue
			}
			if err != nil {
				return err
			}
			if err := tn.Free(ptr); err != nil {
				return err
			}
		}
		return nil
	})
	require.Zero(t, p.MemoryUsed())
	require.Zero(t, drv.Live().Bytes)
	require.Equal(t, 132, p.Stats().FreeSMs)
}

func TestEnvironConfiguresLimits(t *testing.T) {
	p, _ := openSim(t, WithEnviron([]string{"CUDA_DEVICE_MEMORY_LIMIT=2g", "CUDA_DEVICE_SM_LIMIT=25"}))
	require.Equal(t, uint64(2<<30), p.MemoryLimit())
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	require.Equal(t, 0.25, a.Stats().SMLimit)

	// Issue 27 #2: the node's limit binds every kind of tenant. Before,
	// WithGPUShare(1) gave a share of 1 and no limit, and a floor (a share
	// of 1) escaped it too.
	b, err := p.NewTenant("b", WithGPUShare(1))
	require.NoError(t, err)
	require.Equal(t, 0.25, b.Stats().GPUShare)
	c, err := p.NewTenant("c", WithBandwidthFloor(0.5))
	require.NoError(t, err)
	require.Equal(t, 0.25, c.Stats().GPUShare)
	d, err := p.NewTenant("d", WithSMLimit(0.9))
	require.NoError(t, err)
	require.Equal(t, 0.25, d.Stats().SMLimit)
	e, err := p.NewTenant("e", WithGPUShare(0.1))
	require.NoError(t, err)
	require.Equal(t, 0.1, e.Stats().GPUShare, "a share under the limit stays")
}

func TestStreamOfACollectedTenantSaysClosed(t *testing.T) {
	p, _ := openSim(t)
	s := func() *Stream {
		tn, err := p.NewTenant("dropped", WithSMs(8))
		require.NoError(t, err)
		return tn.Stream()
	}()
	require.Eventually(t, func() bool { runtime.GC(); return len(p.Tenants()) == 0 }, 5*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, s.Synchronize(), ErrClosed, "a stream outliving its tenant must fail cleanly, not crash")
}

// together runs f(0), ..., f(n-1) on n goroutines at once and fails t with
// every error they return.
func together(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// A Free the driver refuses leaves the allocation tracked and counted; a
// later Free and the tenant's Close still give everything back.
func TestRefusedFreeKeepsTracking(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithMemoryQuota(4<<20), WithoutMemoryPool())
	require.NoError(t, err)
	ptr, err := a.Alloc(context.Background(), 4<<20)
	require.NoError(t, err)
	drv.FailNext("cuMemFree_v2", cuda.ErrorInvalidValue)
	require.ErrorIs(t, a.Free(ptr), ErrInvalidValue)
	require.Equal(t, uint64(4<<20), a.Stats().MemoryUsed)
	require.Equal(t, uint64(4<<20), p.MemoryUsed())
	require.NoError(t, a.Free(ptr), "still the tenant's: it can be freed again")
	require.Zero(t, p.MemoryUsed())
	require.Zero(t, drv.Live().Bytes)
}

// spinKernel loads the sample module into tn and returns its spin kernel
// (one argument: the cycles to spin).
func spinKernel(t testing.TB, tn *Tenant) *Function {
	t.Helper()
	mod, err := tn.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("spin")
	require.NoError(t, err)
	return fn
}

// Issue 38 #13: the partition unit is a field of DeviceInfo (it was a
// method of Pool), WithPartitionUnit's where given.
func TestPartitionUnitInDeviceInfo(t *testing.T) {
	p, _ := openSim(t, WithPartitionUnit(16))
	require.Equal(t, 16, p.Device().PartitionUnit)
	require.Equal(t, 8, p.Device().Granularity)
	require.Equal(t, 132, p.Stats().FreeSMs, "8 groups of 16 and the remainder of 4")
}
