package fcsp

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// openGPU opens the real device or skips, saying why.
func openGPU(t testing.TB, opts ...Option) *Pool {
	t.Helper()
	p, err := Open(context.Background(), 0, opts...)
	if errors.Is(err, ErrNoDriver) {
		skipGPU(t, err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// runChain launches the chain kernel on the tenant's stream and checks it.
func runChain(t *testing.T, tn *Tenant, n, steps int) []byte {
	t.Helper()
	ctx := context.Background()
	mod, err := tn.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	buf, err := tn.Alloc(ctx, uint64(4*n))
	require.NoError(t, err)
	defer func() { require.NoError(t, tn.Free(buf)) }()
	require.NoError(t, tn.CopyToDevice(buf, bytes.Repeat([]byte{0xff}, 4*n)))
	var a Args
	a.Ptr(buf).Int32(int32(n)).Int32(int32(steps))
	require.NoError(t, tn.Stream().Launch(ctx, fn, Dim3{X: uint32((n + 255) / 256), Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &a))
	require.NoError(t, tn.Stream().Synchronize())
	out := make([]byte, 4*n)
	require.NoError(t, tn.CopyFromDevice(out, buf))
	require.NoError(t, kernels.CheckChain(out, steps))
	return out
}

func TestGPUTenantsOnTheirOwnSMs(t *testing.T) {
	p := openGPU(t, WithPartitionUnit(64))
	info := p.Device()
	nv := p.NVML()
	t.Logf("%s; NVML: %+v", info, nv)
	require.True(t, nv.Available, "NVML on the GPU machine: %s", nv.Reason)
	// The driver reports what it can hand out, a little under NVML's total.
	require.InEpsilon(t, float64(nv.MemoryTotal), float64(info.TotalMemory), 0.01)
	require.False(t, info.Simulated)
	require.Equal(t, 64, p.Device().PartitionUnit)
	a, err := p.NewTenant("a", WithSMs(64))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithSMs(64))
	require.NoError(t, err)
	require.Equal(t, 64, a.SMs(), "SMs read back from the green context")
	require.Equal(t, 64, b.SMs())
	_, err = p.NewTenant("c", WithSMs(64))
	require.ErrorIs(t, err, ErrInsufficientSMs)
	ra, rb := runChain(t, a, 1<<16, 1024), runChain(t, b, 1<<16, 1024)
	require.Equal(t, ra, rb, "both partitions compute the same bits")
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
}

func TestGPUQuotaAndDriverOOM(t *testing.T) {
	p := openGPU(t)
	ctx := context.Background()
	a, err := p.NewTenant("a", WithSMs(8), WithMemoryQuota(8<<20))
	require.NoError(t, err)
	defer a.Close()
	var ptrs []DevicePtr
	for i := 0; i < 8; i++ {
		ptr, err := a.Alloc(ctx, 1<<20)
		require.NoError(t, err)
		ptrs = append(ptrs, ptr)
	}
	_, err = a.Alloc(ctx, 1)
	require.ErrorIs(t, err, ErrQuotaExceeded)
	free, total, err := a.MemGetInfo()
	require.NoError(t, err)
	require.Equal(t, uint64(8<<20), total)
	require.Zero(t, free)
	for _, ptr := range ptrs {
		require.NoError(t, a.Free(ptr))
	}

	// A request the quota admits but the card cannot hold: the driver's
	// out-of-memory must give the quota back.
	big, err := p.NewTenant("big")
	require.NoError(t, err)
	defer big.Close()
	df, _, err := big.MemGetInfo()
	require.NoError(t, err)
	want := min(df+(1<<30), p.MemoryLimit())
	_, err = big.Alloc(ctx, want)
	require.ErrorIs(t, err, ErrDeviceOutOfMemory, "asked for %d bytes with %d free", want, df)
	require.Zero(t, big.Stats().MemoryUsed)
	require.Zero(t, p.MemoryUsed())
}

func TestGPUAllocFromMigratingGoroutines(t *testing.T) {
	p := openGPU(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	defer a.Close()
	together(t, 32, func(int) error {
		for i := 0; i < 25; i++ {
			runtime.Gosched()
			ptr, err := a.Alloc(context.Background(), 1<<20)
			if err == nil {
				err = a.Free(ptr)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.Zero(t, a.Stats().MemoryUsed)
}

func TestGPUCloseLeavesNothing(t *testing.T) {
	p := openGPU(t)
	probe, err := p.NewTenant("probe")
	require.NoError(t, err)
	before, _, err := probe.MemGetInfo()
	require.NoError(t, err)
	a, err := p.NewTenant("leaky", WithSMs(8))
	require.NoError(t, err)
	for i := 0; i < 64; i++ {
		_, err := a.Alloc(context.Background(), 16<<20)
		require.NoError(t, err)
	}
	require.NoError(t, a.Close())
	after, _, err := probe.MemGetInfo()
	require.NoError(t, err)
	// Green-context bookkeeping may keep a few MiB; the 1 GiB must be back.
	require.InDelta(t, float64(before), float64(after), 64<<20, "device free memory before %d after %d", before, after)
	require.NoError(t, probe.Close())
	_ = cuda.ErrorOutOfMemory
}

func TestGPUMemoryPool(t *testing.T) {
	p := openGPU(t)
	const quota = 256 << 20
	a, err := p.NewTenant("pooled", WithSMs(8), WithMemoryQuota(quota), WithMemoryPool(0))
	require.NoError(t, err)
	defer a.Close()
	ctx := context.Background()
	ptr, err := a.Alloc(ctx, 64<<20)
	require.NoError(t, err)
	require.NoError(t, a.Free(ptr))
	held, err := a.c.mem.Reserved()
	require.NoError(t, err)
	require.GreaterOrEqual(t, held, uint64(64<<20), "freed memory stays cached")
	free, total, err := a.MemGetInfo()
	require.NoError(t, err)
	require.Equal(t, uint64(quota), total)
	require.LessOrEqual(t, free, uint64(quota-64<<20), "cached bytes count against the tenant")

	// Storm from 16 goroutines: the pool never holds more than the quota.
	together(t, 16, func(g int) error {
		var mine []DevicePtr
		for i := 0; i < 200; i++ {
			if len(mine) > 3 {
				if err := a.Free(mine[0]); err != nil {
					return err
				}
				mine = mine[1:]
			}
			ptr, err := a.Alloc(ctx, uint64(1+(g*7919+i*104729)%(8<<20)))
			if errors.Is(err, ErrQuotaExceeded) {
				continue
			}
			if err != nil {
				return err
			}
			mine = append(mine, ptr)
		}
		for _, ptr := range mine {
			if err := a.Free(ptr); err != nil {
				return err
			}
		}
		return nil
	})
	held, err = a.c.mem.Reserved()
	require.NoError(t, err)
	require.LessOrEqual(t, held, uint64(quota), "the driver kept the pool within the quota (maxSize)")
	require.Zero(t, a.Stats().MemoryUsed)
	require.NoError(t, a.Trim())
	held, err = a.c.mem.Reserved()
	require.NoError(t, err)
	require.Zero(t, held, "Trim returned the cache")
}

// TestGPUFreeLists: a block freed on a stream is handed back to the next
// allocation of its class on that stream, without the driver, and holds
// data; goroutines with streams of their own never get one block twice.
func TestGPUFreeLists(t *testing.T) {
	p := openGPU(t)
	const quota = 512 << 20
	a, err := p.NewTenant("lists", WithSMs(8), WithMemoryQuota(quota), WithMemoryPool(0))
	require.NoError(t, err)
	defer a.Close()
	s, err := a.NewStream(ClassDefault)
	require.NoError(t, err)
	x, err := a.AllocAsync(s, 1<<20)
	require.NoError(t, err)
	require.NoError(t, a.FreeAsync(s, x))
	require.Equal(t, uint64(1<<20), a.Stats().MemoryCached)
	y, err := a.AllocAsync(s, 1<<20-100)
	require.NoError(t, err)
	require.Equal(t, x, y, "same class, same stream: the cached block")
	require.NoError(t, s.Synchronize())
	in := make([]byte, 1<<20-100)
	for i := range in {
		in[i] = byte(i * 31)
	}
	require.NoError(t, a.CopyToDevice(y, in))
	out := make([]byte, len(in))
	require.NoError(t, a.CopyFromDevice(out, y))
	require.Equal(t, in, out)
	require.NoError(t, a.FreeAsync(s, y))

	var streams []*Stream
	for range 16 {
		st, err := a.NewStream(ClassDefault)
		require.NoError(t, err)
		streams = append(streams, st)
	}
	var owned owners
	together(t, len(streams), func(g int) error {
		st := streams[g]
		var mine []DevicePtr
		for i := range 500 {
			if len(mine) > 4 {
				owned.give(mine[0])
				if err := a.FreeAsync(st, mine[0]); err != nil {
					return err
				}
				mine = mine[1:]
			}
			ptr, err := a.AllocAsync(st, uint64(4<<10)<<((g+i)%10))
			if err != nil {
				return err
			}
			if err := owned.take(ptr); err != nil {
				return err
			}
			mine = append(mine, ptr)
		}
		for _, ptr := range mine {
			if err := a.FreeAsync(st, ptr); err != nil {
				return err
			}
		}
		return nil
	})
	require.Zero(t, a.Stats().MemoryUsed)
	require.NotZero(t, a.Stats().MemoryCached)
	held, err := a.c.mem.Reserved()
	require.NoError(t, err)
	require.LessOrEqual(t, held, uint64(quota))
	require.NoError(t, a.Trim())
	require.Zero(t, a.Stats().MemoryCached)
	held, err = a.c.mem.Reserved()
	require.NoError(t, err)
	require.Zero(t, held, "Trim returned the lists and the pool's cache")
}

// TestGPUStreamPerRequest: a stream per request, closed at its end, on a
// partitioned tenant with a pool: the streams are destroyed, their cached
// blocks return to the pool, and nothing accumulates.
func TestGPUStreamPerRequest(t *testing.T) {
	p := openGPU(t)
	a, err := p.NewTenant("per-request", WithSMs(8), WithMemoryQuota(256<<20), WithMemoryPool(0))
	require.NoError(t, err)
	defer a.Close()
	for range 200 {
		s, err := a.NewStream(ClassDefault)
		require.NoError(t, err)
		ptr, err := a.AllocAsync(s, 1<<20)
		require.NoError(t, err)
		require.NoError(t, a.FreeAsync(s, ptr))
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.Synchronize(), ErrClosed)
	}
	st := a.Stats()
	require.Equal(t, 1, st.Streams)
	require.Zero(t, st.MemoryCached)
	require.Zero(t, st.MemoryUsed)
	require.NoError(t, a.Trim())
	held, err := a.c.mem.Reserved()
	require.NoError(t, err)
	require.Zero(t, held)
}

// TestGPUSmallQuotaPool: a pooled tenant whose quota is below the pool's
// 32 MiB chunk allocates up to its quota, and no further.
func TestGPUSmallQuotaPool(t *testing.T) {
	p := openGPU(t)
	a, err := p.NewTenant("small", WithSMs(8), WithMemoryQuota(64<<10), WithMemoryPool(0))
	require.NoError(t, err)
	defer a.Close()
	for i := range 4 {
		_, err := a.Alloc(context.Background(), 16<<10)
		require.NoError(t, err, "allocation %d", i)
	}
	_, err = a.Alloc(context.Background(), 1)
	require.ErrorIs(t, err, ErrQuotaExceeded)
}
