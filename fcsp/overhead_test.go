package fcsp

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

func noWarm(Current) error { return nil }

// overheadBytes is what ov's counts cost, as the SDK charges them.
func overheadBytes(ov Overhead) uint64 {
	return uint64(ov.GreenMade)*cuda.GreenCtxCost + uint64(ov.StreamsLive)*cuda.StreamCost +
		uint64(ov.EventsLive)*cuda.EventCost + ov.Modules
}

// Issue 54: the SDK's own device memory (a partition's green contexts, its
// streams) is counted in PoolStats.Overhead and against the device limit:
// an allocation is refused at the limit with the overhead included, and
// the device's view of the process (the fake's, as NVML's) stays within
// the limit.
func TestOverheadCountsAgainstTheDeviceLimit(t *testing.T) {
	const limit = 256 << 20
	p, drv := openSim(t, WithDeviceMemoryLimit(limit))
	part, err := p.NewTenant("part", WithSMs(16), WithConcurrentDos(4), WithWarmup(noWarm))
	require.NoError(t, err)
	plain, err := p.NewTenant("plain", WithoutMemoryPool())
	require.NoError(t, err)
	defer runtime.KeepAlive(part) // a tenant collected is closed, and gives its contexts back
	ov := p.Stats().Overhead
	require.GreaterOrEqual(t, ov.GreenMade, 4, "the partition's 4 contexts, warmed at NewTenant")
	require.Equal(t, ov.GreenMade, ov.GreenLive, "none destroyed")
	require.Positive(t, ov.StreamsLive)
	require.Equal(t, overheadBytes(ov), ov.Bytes)
	require.Equal(t, ov.Bytes, ov.GreenContexts+ov.Streams+ov.Events+ov.Modules)
	require.Zero(t, p.MemoryUsed(), "MemoryUsed is the tenants' alone")
	require.Equal(t, ov.Bytes, drv.ProcessMemory(), "the device holds what the pool counts")

	ctx := context.Background()
	room := uint64(limit) - ov.Bytes
	_, err = plain.Alloc(ctx, room+1)
	require.ErrorIs(t, err, ErrQuotaExceeded, "one byte past what the overhead leaves")
	ptr, err := plain.Alloc(ctx, room)
	require.NoError(t, err, "exactly what the overhead leaves")
	require.Equal(t, uint64(limit), drv.ProcessMemory(), "the device's view of the process at the limit, not past it")
	free, _, err := plain.MemGetInfo()
	require.NoError(t, err)
	require.Zero(t, free)

	// An object the SDK would make past the limit is refused too: a
	// partition's green contexts.
	_, err = p.NewTenant("more", WithSMs(16))
	require.ErrorIs(t, err, ErrQuotaExceeded)
	require.Contains(t, err.Error(), "a green context holds 4 MiB of device memory")
	require.LessOrEqual(t, drv.ProcessMemory(), uint64(limit))
	require.NoError(t, plain.Free(ptr))
	_, err = p.NewTenant("more", WithSMs(16))
	require.NoError(t, err, "with the memory back")
}

// A Do that would make one more green context where the device limit has
// no room waits for the contexts its size has, rather than failing.
func TestDoPastTheLimitWaitsForItsContexts(t *testing.T) {
	const limit = 256 << 20
	p, drv := openSim(t, WithDeviceMemoryLimit(limit))
	part, err := p.NewTenant("part", WithSMs(16), WithConcurrentDos(8))
	require.NoError(t, err)
	plain, err := p.NewTenant("plain", WithoutMemoryPool())
	require.NoError(t, err)
	ov := p.Stats().Overhead
	_, err = plain.Alloc(context.Background(), limit-ov.Bytes)
	require.NoError(t, err)
	runDos(t, part, 8)
	require.Equal(t, ov.GreenMade, p.Stats().Overhead.GreenMade, "no context made past the limit")
	require.Equal(t, uint64(limit), drv.ProcessMemory())
	runtime.KeepAlive(plain) // a tenant collected is closed, and frees what it holds
}

// runDos runs n Dos of t at once, each holding its context a moment.
func runDos(t *testing.T, tn *Tenant, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			errs <- tn.Do(context.Background(), func(Current) error { time.Sleep(2 * time.Millisecond); return nil })
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// WithGreenContextLimit bounds the green contexts a pool makes: a
// configuration that would pass it is refused at NewTenant with
// ErrGreenContextLimit (its warm-up makes them all), Dos past it wait for
// those made, and a bad bound is ErrInvalidArgument.
func TestGreenContextLimit(t *testing.T) {
	_, err := openSimErr(0, WithGreenContextLimit(0))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "WithGreenContextLimit(0)")

	p, _ := openSim(t, WithGreenContextLimit(10))
	_, err = p.NewTenant("warm", WithSMs(16), WithWarmup(noWarm)) // 16 contexts
	require.ErrorIs(t, err, ErrGreenContextLimit)
	require.Contains(t, err.Error(), "WithGreenContextLimit")
	_, ok := p.Tenant("warm")
	require.False(t, ok, "the refused tenant is undone")

	made := p.Stats().Overhead.GreenMade
	require.LessOrEqual(t, made, 10)
	cold, err := p.NewTenant("cold", WithSMs(16))
	require.NoError(t, err, "the contexts kept from the refused tenant serve")
	runDos(t, cold, 16)
	ov := p.Stats().Overhead
	require.LessOrEqual(t, ov.GreenMade, 10, "Dos past the bound wait for the contexts made")
	require.Equal(t, 10, ov.GreenLimit)
	require.Equal(t, overheadBytes(ov), ov.Bytes)
}

// How many green contexts a configuration makes, as WithGreenContextLimit
// says: a latency class of 16-48 SMs (5 sizes of 8) with 16 Dos, warmed
// at NewTenant, is 80; and each holds 4 MiB in the overhead.
func TestGreenContextsOfALatencyClass(t *testing.T) {
	p, _ := openSim(t)
	before := p.Stats().Overhead.GreenMade
	_, err := p.NewTenant("latency", WithLatencyTarget(300*time.Microsecond, 16, 48), WithWarmup(noWarm))
	require.NoError(t, err)
	ov := p.Stats().Overhead
	class := ov.GreenMade - before
	t.Logf("latency class 16-48 SMs: %d green contexts (%d made by the pool in all, the commons' included); overhead %d MiB",
		class, ov.GreenMade, ov.Bytes>>20)
	require.GreaterOrEqual(t, class, 80)
	require.LessOrEqual(t, class, 80+2, "80, and the commons' moves off its SMs")
	require.Equal(t, uint64(ov.GreenMade)*cuda.GreenCtxCost, ov.GreenContexts)
}

// Issue 54: the device's own view of the process (the fake's figure, as
// NVML's), sampled beside what the pool counts; the difference is memory
// nobody counted (here the primary context and a library's allocation
// made outside the pool), logged past a bound, and, with the headroom
// option, refused to allocations.
func TestUnaccountedMemory(t *testing.T) {
	_, err := openSimErr(0, WithUnaccountedHeadroom())
	require.ErrorIs(t, err, ErrInvalidArgument, "the simulator samples only when asked")
	require.Contains(t, err.Error(), "WithMemorySampling")

	const limit, primary, library = 1 << 30, 300 << 20, 200 << 20
	spec := fake.H200()
	spec.PrimaryCtxCost = primary
	var logs syncBuffer
	p, drv := openSim(t, simulator(spec), WithDeviceMemoryLimit(limit), WithMemorySampling(time.Hour),
		WithUnaccountedMemoryBound(400<<20), WithUnaccountedHeadroom(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	ctx := context.Background()
	ptr, err := a.Alloc(ctx, 100<<20)
	require.NoError(t, err)

	// The source is opened on the sampler's goroutine, which then samples.
	require.Eventually(t, func() bool { return !p.Stats().DeviceMemory.At.IsZero() }, 5*time.Second, time.Millisecond)
	p.watch.Sample()
	s := p.Stats()
	dm := s.DeviceMemory
	require.False(t, dm.At.IsZero())
	require.Equal(t, drv.ProcessMemory(), dm.Used)
	require.Equal(t, s.MemoryOwn+s.Overhead.Bytes, dm.Counted)
	require.Equal(t, uint64(primary), dm.Unaccounted, "the primary context: nothing counts it")
	require.Equal(t, dm.Unaccounted, dm.Charged)
	require.NotContains(t, logs.String(), "passed its bound")

	// A library allocates for itself, outside the pool.
	lib, err := drv.MemAlloc(p.dev.Primary(), library)
	require.NoError(t, err)
	p.watch.Sample()
	s = p.Stats()
	require.Equal(t, uint64(primary+library), s.DeviceMemory.Unaccounted)
	require.Contains(t, logs.String(), "passed its bound")
	require.Contains(t, logs.String(), `unaccounted="500 MiB"`)
	require.LessOrEqual(t, s.DeviceMemory.Used, uint64(limit))

	// Folded into the limit's headroom: what fits the counted figures alone
	// is refused, before the device would pass the limit.
	room := limit - s.MemoryUsed - s.Overhead.Bytes // what the limit leaves without the headroom
	_, err = a.Alloc(ctx, room-room%(32<<20))
	require.ErrorIs(t, err, ErrQuotaExceeded, "the unaccounted memory counts against the limit")
	require.LessOrEqual(t, drv.ProcessMemory(), uint64(limit))
	free, _, err := a.MemGetInfo()
	require.NoError(t, err)
	q, err := a.Alloc(ctx, free)
	require.NoError(t, err, "MemGetInfo's free, the headroom taken, fits")
	require.LessOrEqual(t, drv.ProcessMemory(), uint64(limit))
	require.NoError(t, a.Free(q))

	require.NoError(t, drv.MemFree(p.dev.Primary(), lib))
	p.watch.Sample()
	s = p.Stats()
	require.Equal(t, uint64(primary), s.DeviceMemory.Charged, "the charge follows the figure down")
	require.NoError(t, a.Free(ptr))
}

// Without sampling (the simulator's default), the figures say why.
func TestDeviceMemoryNotSampled(t *testing.T) {
	p, _ := openSim(t)
	dm := p.Stats().DeviceMemory
	require.True(t, dm.At.IsZero())
	require.Contains(t, dm.Reason, "not sampled")
	_, err := openSimErr(0, WithMemorySampling(time.Microsecond))
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// syncBuffer is a bytes.Buffer a logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
