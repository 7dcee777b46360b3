package fake_test

import (
	"encoding/binary"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// opened is a fake with the primary context retained, a module holding
// okPTX's "mine", and its function.
func opened(t *testing.T) (*fake.Driver, cuda.Context, cuda.Function) {
	t.Helper()
	drv := fake.New(fake.H200())
	ctx, err := drv.PrimaryCtxRetain(0)
	require.NoError(t, err)
	m, err := drv.ModuleLoadData(ctx, []byte(okPTX))
	require.NoError(t, err)
	f, err := drv.ModuleGetFunction(ctx, m, "mine")
	require.NoError(t, err)
	return drv, ctx, f
}

func newStream(t *testing.T, drv *fake.Driver, ctx cuda.Context) cuda.Stream {
	t.Helper()
	s, err := drv.StreamCreate(ctx, cuda.StreamNonBlocking)
	require.NoError(t, err)
	return s
}

var one = cuda.Dim3{X: 1, Y: 1, Z: 1}

// within fails the test unless f returns within d, and returns what it
// returned.
func within(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
		return nil
	}
}

// notWithin fails the test if f returns within d; it returns a channel
// that gets f's result once it does return.
func notWithin(t *testing.T, d time.Duration, what string, f func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) while it should wait", what, err)
	case <-time.After(d):
	}
	return done
}

// A kernel runs outside the driver's lock: while one tenant's long kernel
// runs, every other call of the driver answers, as on a GPU, where a kernel
// holds only its SMs. The kernel's own stream is busy meanwhile.
func TestLongKernelHoldsUpNoOtherCall(t *testing.T) {
	drv, ctx, f := opened(t)
	started, release := make(chan struct{}), make(chan struct{})
	drv.RegisterKernel("mine", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error {
		close(started)
		<-release
		return nil
	})
	a, b := newStream(t, drv, ctx), newStream(t, drv, ctx)
	launched := make(chan error, 1)
	go func() { launched <- drv.LaunchKernel(ctx, f, one, one, 0, a, nil) }()
	<-started

	require.NoError(t, within(t, 5*time.Second, "a call beside a running kernel", func() error {
		p, err := drv.MemAlloc(ctx, 4096)
		if err != nil {
			return err
		}
		if err := drv.MemcpyHtoD(ctx, p, make([]byte, 4096)); err != nil {
			return err
		}
		if err := drv.MemsetD32Async(ctx, p, 7, 1024, b); err != nil {
			return err
		}
		if err := drv.StreamSynchronize(ctx, b); err != nil {
			return err
		}
		return drv.MemFree(ctx, p)
	}))
	require.ErrorIs(t, drv.StreamQuery(ctx, a), cuda.ErrorNotReady, "its kernel runs")
	require.NoError(t, drv.StreamQuery(ctx, b))
	close(release)
	require.NoError(t, <-launched)
	require.NoError(t, drv.StreamQuery(ctx, a))
}

// Work on one stream runs in order, whoever queues it: a launch behind a
// running kernel joins the queue and returns, as on a GPU, and runs after
// it; an event recorded after both completes after both; a
// synchronisation waits for both.
func TestStreamOrderIsKept(t *testing.T) {
	drv, ctx, f := opened(t)
	var mu sync.Mutex
	var order []uint32
	started, release := make(chan struct{}), make(chan struct{})
	drv.RegisterKernel("mine", func(_ *fake.Memory, grid, _ cuda.Dim3, _ []byte, _ []uint32) error {
		if grid.X == 1 {
			close(started)
			<-release
		}
		mu.Lock()
		order = append(order, grid.X)
		mu.Unlock()
		return nil
	})
	a := newStream(t, drv, ctx)
	first := make(chan error, 1)
	go func() { first <- drv.LaunchKernel(ctx, f, one, one, 0, a, nil) }()
	<-started
	require.NoError(t, within(t, 5*time.Second, "a launch behind a running kernel", func() error {
		return drv.LaunchKernel(ctx, f, cuda.Dim3{X: 2, Y: 1, Z: 1}, one, 0, a, nil)
	}))
	e, err := drv.EventCreate(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, drv.EventRecord(ctx, e, a))
	require.ErrorIs(t, drv.EventQuery(ctx, e), cuda.ErrorNotReady)
	synced := notWithin(t, 20*time.Millisecond, "StreamSynchronize of a busy stream", func() error { return drv.StreamSynchronize(ctx, a) })
	evSynced := notWithin(t, 0, "EventSynchronize of an event behind a running kernel", func() error { return drv.EventSynchronize(ctx, e) })
	close(release)
	require.NoError(t, <-first)
	require.NoError(t, <-synced)
	require.NoError(t, <-evSynced)
	require.NoError(t, drv.EventQuery(ctx, e))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []uint32{1, 2}, order)
}

// With nothing else queued, a launch has run when it returns: the fake
// stays deterministic for tests that read results straight after.
func TestLaunchOnAnIdleStreamHasRunWhenItReturns(t *testing.T) {
	drv, ctx, f := opened(t)
	ran := 0
	drv.RegisterKernel("mine", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error { ran++; return nil })
	s := newStream(t, drv, ctx)
	for i := 1; i <= 3; i++ {
		require.NoError(t, drv.LaunchKernel(ctx, f, one, one, 0, s, nil))
		require.Equal(t, i, ran)
		require.NoError(t, drv.StreamQuery(ctx, s))
	}
	require.NoError(t, drv.LaunchKernel(ctx, f, one, one, 0, 0, nil), "the NULL stream too")
	require.Equal(t, 4, ran)
}

// The fake refuses what the GPU refuses, from the device's attributes:
// grids past 2^31-1 in X or 65535 in Y and Z, blocks past 1024 threads or
// 1024 x 1024 x 64, dynamic shared memory past the attribute.
func TestLaunchLimitsAreTheDevices(t *testing.T) {
	drv, ctx, f := opened(t)
	drv.RegisterKernel("mine", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error { return nil })
	s := newStream(t, drv, ctx)
	attr := func(a cuda.Attribute) int {
		v, err := drv.DeviceAttribute(0, a)
		require.NoError(t, err, "attribute %d", a)
		return v
	}
	maxGrid := [3]int{attr(cuda.AttrMaxGridDimX), attr(cuda.AttrMaxGridDimY), attr(cuda.AttrMaxGridDimZ)}
	maxBlock := [3]int{attr(cuda.AttrMaxBlockDimX), attr(cuda.AttrMaxBlockDimY), attr(cuda.AttrMaxBlockDimZ)}
	require.Equal(t, [3]int{math.MaxInt32, 65535, 65535}, maxGrid)
	require.Equal(t, [3]int{1024, 1024, 64}, maxBlock)
	require.Equal(t, 1024, attr(cuda.AttrMaxThreadsPerBlock))
	shared := attr(cuda.AttrMaxSharedMemoryPerBlock)
	require.Equal(t, 48<<10, shared)
	require.Equal(t, 227<<10, attr(cuda.AttrMaxSharedMemoryPerBlockOptin))

	for _, c := range []struct {
		grid, block cuda.Dim3
		shmem       uint32
		ok          bool
	}{
		{cuda.Dim3{X: math.MaxInt32, Y: 1, Z: 1}, one, 0, true},
		{cuda.Dim3{X: math.MaxInt32 + 1, Y: 1, Z: 1}, one, 0, false},
		{cuda.Dim3{X: 1, Y: 65535, Z: 65535}, one, 0, true},
		{cuda.Dim3{X: 1, Y: 65536, Z: 1}, one, 0, false},
		{cuda.Dim3{X: 1, Y: math.MaxUint32, Z: 1}, one, 0, false},
		{cuda.Dim3{X: 1, Y: 1, Z: math.MaxUint32}, one, 0, false},
		{cuda.Dim3{X: 0, Y: 1, Z: 1}, one, 0, false},
		{one, cuda.Dim3{X: 1024, Y: 1, Z: 1}, 0, true},
		{one, cuda.Dim3{X: 1, Y: 1024, Z: 1}, 0, true},
		{one, cuda.Dim3{X: 1, Y: 1, Z: 64}, 0, true},
		{one, cuda.Dim3{X: 1025, Y: 1, Z: 1}, 0, false},
		{one, cuda.Dim3{X: 1, Y: 1, Z: 65}, 0, false},
		{one, cuda.Dim3{X: 32, Y: 32, Z: 2}, 0, false}, // 2048 threads
		{one, cuda.Dim3{X: 1, Y: 0, Z: 1}, 0, false},
		{one, one, uint32(shared), true},
		{one, one, uint32(shared) + 1, false},
	} {
		err := drv.LaunchKernel(ctx, f, c.grid, c.block, c.shmem, s, nil)
		if c.ok {
			require.NoError(t, err, "grid %v block %v shmem %d", c.grid, c.block, c.shmem)
		} else {
			require.ErrorIs(t, err, cuda.ErrorInvalidValue, "grid %v block %v shmem %d", c.grid, c.block, c.shmem)
		}
	}
	spec := fake.T4()
	spec.MaxSharedPerBlock = 16 << 10
	t4 := fake.New(spec)
	v, err := t4.DeviceAttribute(0, cuda.AttrMaxSharedMemoryPerBlock)
	require.NoError(t, err)
	require.Equal(t, 16<<10, v, "the limit is the spec's")
}

// Kernels on many streams from many goroutines, each stream's in order,
// with memory written and read back: clean under -race.
func TestManyStreamsManyGoroutines(t *testing.T) {
	drv, ctx, f := opened(t)
	drv.RegisterKernel("mine", func(mem *fake.Memory, grid, _ cuda.Dim3, args []byte, offs []uint32) error {
		p := cuda.DevicePtr(binary.LittleEndian.Uint64(args[offs[0]:]))
		b, ok := mem.Slice(p, 4)
		if !ok {
			return nil
		}
		b[0]++ // a stream's kernels run one at a time
		return nil
	})
	const streams, launches = 4, 50
	var wg sync.WaitGroup
	for g := 0; g < streams; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := drv.StreamCreate(ctx, cuda.StreamNonBlocking)
			require.NoError(t, err)
			p, err := drv.MemAlloc(ctx, 4)
			require.NoError(t, err)
			require.NoError(t, drv.MemcpyHtoD(ctx, p, make([]byte, 4)))
			var args cuda.Args
			args.Ptr(p)
			for i := 0; i < launches; i++ {
				require.NoError(t, drv.LaunchKernel(ctx, f, one, one, 0, s, &args))
			}
			require.NoError(t, drv.StreamSynchronize(ctx, s))
			out := make([]byte, 4)
			require.NoError(t, drv.MemcpyDtoH(ctx, out, p))
			require.Equal(t, byte(launches), out[0])
			require.NoError(t, drv.MemFree(ctx, p))
			require.NoError(t, drv.StreamDestroy(ctx, s))
		}()
	}
	wg.Wait()
}
