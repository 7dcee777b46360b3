package fcsp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/smmove"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// tradePair makes the H200 pair of the reshape demo: an interactive tenant
// at 8 SMs that may grow to 16 or 32, and a batch tenant with the rest (124
// SMs with the remainder) that may shrink to 100.
func tradePair(t *testing.T, p *Pool) (lat, batch *Tenant) {
	t.Helper()
	lat, err := p.NewTenant("interactive", WithSMs(8), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	batch, err = p.NewTenant("batch", WithRestOfSMs(), WithReshapeSizes(100))
	require.NoError(t, err)
	require.Equal(t, []int{8, 16, 32}, lat.Stats().ReshapeSizes)
	require.Equal(t, []int{100, 124}, batch.Stats().ReshapeSizes)
	require.Equal(t, 124, batch.SMs())
	return lat, batch
}

func TestReshapeKeepsEverything(t *testing.T) {
	p, drv := openSim(t)
	ctx := context.Background()
	lat, batch := tradePair(t, p)
	mod, err := lat.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	st := lat.Stream()
	extra, err := lat.NewStream(ClassAttention)
	require.NoError(t, err)
	const n, steps = 4096, 64
	buf, err := lat.Alloc(ctx, 4*n)
	require.NoError(t, err)
	launch := func(s *Stream) {
		t.Helper()
		require.NoError(t, lat.CopyToDevice(buf, bytes.Repeat([]byte{0xff}, 4*n)))
		var a Args
		a.Ptr(buf).Int32(n).Int32(steps)
		require.NoError(t, s.Launch(ctx, fn, Dim3{X: n / 256, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &a))
		require.NoError(t, s.Synchronize())
		out := make([]byte, 4*n)
		require.NoError(t, lat.CopyFromDevice(out, buf))
		require.NoError(t, kernels.CheckChain(out, steps))
	}
	launch(st)
	h8, hExtra8 := st.Handle(), extra.Handle()
	used := lat.Stats().MemoryUsed

	// Growing into the batch tenant's groups fails, changing nothing.
	err = lat.Reshape(ctx, 32)
	require.ErrorIs(t, err, ErrInsufficientSMs)
	require.Equal(t, 8, lat.SMs())
	require.Equal(t, h8, st.Handle())

	waits := drv.Calls("cuStreamWaitEvent")
	require.NoError(t, batch.Reshape(ctx, 100))
	require.Equal(t, 100, batch.SMs())
	require.Equal(t, waits+1, drv.Calls("cuStreamWaitEvent"), "the batch tenant's one stream waits for its old one")
	require.NoError(t, lat.Reshape(ctx, 32))
	require.Equal(t, 32, lat.SMs())
	require.Equal(t, 32, lat.Stats().SMs)
	require.Equal(t, waits+3, drv.Calls("cuStreamWaitEvent"), "both interactive streams wait for their old ones")
	require.Same(t, st, lat.Stream(), "the Stream value is the same")
	require.NotEqual(t, h8, st.Handle(), "its handle is the new layout's")
	require.NotEqual(t, hExtra8, extra.Handle())
	require.Equal(t, used, lat.Stats().MemoryUsed, "memory and quota are untouched")
	launch(st) // the old Function value runs on the new layout, on the old buffer
	launch(extra)
	require.NoError(t, lat.Reshape(ctx, 16))
	require.Equal(t, 16, lat.SMs())
	require.NoError(t, lat.Reshape(ctx, 8))
	require.Equal(t, h8, st.Handle(), "back on the first layout, its stream again")
	launch(st)
	require.NoError(t, lat.Reshape(ctx, 8), "to the current size: nothing to do")
	require.NoError(t, lat.Free(buf))
	require.NoError(t, extra.Close())
	require.NoError(t, lat.Close())
	require.NoError(t, batch.Close())
	live := drv.Live()
	requireNoGreenHeld(t, p, drv)
	require.Zero(t, live.Streams)
	require.Zero(t, live.Events)
	require.Zero(t, live.Modules)
	require.Equal(t, 132, p.Stats().FreeSMs)
}

func TestReshapeBadInput(t *testing.T) {
	p, drv := openSim(t)
	ctx := context.Background()
	lat, batch := tradePair(t, p)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	h := lat.Stream().Handle()
	waits := drv.Calls("cuStreamWaitEvent")
	for _, tc := range []struct {
		name string
		t    *Tenant
		sms  int
		want error
		msg  string
	}{
		{"no layout of that size", lat, 24, ErrGranularity, "layouts are 8, 16, 32 SMs"},
		{"zero", lat, 0, ErrGranularity, "layouts are 8, 16, 32 SMs"},
		{"negative", lat, -8, ErrGranularity, "layouts are 8, 16, 32 SMs"},
		{"the whole device", lat, 132, ErrGranularity, "layouts are"},
		{"batch to a size it has no layout for", batch, 112, ErrGranularity, "layouts are 100, 124 SMs"},
		{"growing into held SMs", lat, 16, ErrInsufficientSMs, "another partition holds"},
		{"made without sizes", plain, 8, ErrInvalidArgument, "without WithReshapeSizes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Reshape(ctx, tc.sms)
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
	require.Equal(t, 8, lat.SMs())
	require.Equal(t, 124, batch.SMs())
	require.Equal(t, h, lat.Stream().Handle())
	require.Equal(t, waits, drv.Calls("cuStreamWaitEvent"), "nothing was switched")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, lat.Reshape(cctx, 16), context.Canceled)

	// Sizes no layout can give are refused at NewTenant.
	for _, tc := range []struct {
		name string
		opts []TenantOption
		want error
	}{
		{"not a multiple", []TenantOption{WithSMs(8), WithReshapeSizes(12)}, ErrGranularity},
		{"past the split", []TenantOption{WithSMs(8), WithReshapeSizes(128)}, ErrInsufficientSMs},
		{"no start", []TenantOption{WithReshapeSizes(8)}, ErrInvalidArgument},
		{"no sizes", []TenantOption{WithSMs(8), WithReshapeSizes()}, ErrInvalidArgument},
		{"negative size", []TenantOption{WithSMs(8), WithReshapeSizes(-8)}, ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.NewTenant("x", tc.opts...)
			require.ErrorIs(t, err, tc.want)
		})
	}
	require.NoError(t, lat.Close())
	require.ErrorIs(t, lat.Reshape(ctx, 16), ErrClosed)
	require.NoError(t, batch.Close())
	require.NoError(t, plain.Close())
	require.Equal(t, 132, p.Stats().FreeSMs, "nothing leaked by the refusals")
	requireNoGreenHeld(t, p, drv)
}

// Launches, synchronisations and allocations from several goroutines while
// the tenant reshapes back and forth, and a Close racing all of them: every
// launch lands on a stream of the layout its Function was looked up in (the
// fake refuses a function from another context), nothing leaks.
func TestReshapeRacesCallsAndClose(t *testing.T) {
	p, drv := openSim(t)
	ctx := context.Background()
	lat, err := p.NewTenant("interactive", WithSMs(8), WithReshapeSizes(16, 32), WithMemoryPool(0))
	require.NoError(t, err)
	fn, err := func() (*Function, error) {
		m, err := lat.LoadModule(kernels.ChainPTX)
		if err != nil {
			return nil, err
		}
		return m.Function("chain")
	}()
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := lat.Stream()
			if g%2 == 1 {
				var err error
				if s, err = lat.NewStream(ClassDefault); err != nil {
					if !errors.Is(err, ErrClosed) {
						errs <- fmt.Errorf("NewStream: %w", err)
					}
					return
				}
			}
			var a Args
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				buf, err := lat.AllocAsync(s, 1024)
				if err == nil {
					a = Args{}
					a.Ptr(buf).Int32(256).Int32(4)
					err = s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &a)
					if err == nil {
						err = lat.FreeAsync(s, buf)
					}
				}
				if err == nil && i%8 == 0 {
					err = s.Synchronize()
				}
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						errs <- fmt.Errorf("iteration %d: %w", i, err)
					}
					return
				}
			}
		}()
	}
	sizes := []int{16, 32, 8, 32, 16, 8}
	for i := range 60 {
		if err := lat.Reshape(ctx, sizes[i%len(sizes)]); err != nil {
			require.ErrorIs(t, err, ErrClosed)
		}
		if i == 50 {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- lat.Close() }()
		}
	}
	close(stop)
	wg.Wait()
	require.NoError(t, lat.Close())
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.ErrorIs(t, lat.Reshape(ctx, 16), ErrClosed)
	live := drv.Live()
	requireNoGreenHeld(t, p, drv)
	require.Zero(t, live.Streams)
	require.Zero(t, live.Bytes)
	require.Equal(t, 132, p.Stats().FreeSMs)
}

// A Reshape that is the first call to meet a sticky fault (internal/smpart makes
// the driver calls) loses the pool as any call would: ErrDeviceLost, not
// the bare CUDA error, and every tenant then sees it (issue 28 #10; before,
// internal/smpart called the driver past the pool's guard).
func TestReshapeMeetsAFault(t *testing.T) {
	ctx := context.Background()
	p, drv := openSim(t)
	lat, err := p.NewTenant("interactive", WithSMs(8), WithReshapeSizes(32))
	require.NoError(t, err)
	other, err := p.NewTenant("batch")
	require.NoError(t, err)
	mod, err := lat.LoadModule(kernels.ChainPTX)
	require.NoError(t, err)
	fn, err := mod.Function("chain")
	require.NoError(t, err)
	require.NoError(t, chainOn(ctx, lat, lat.Stream(), fn, 256, 8))
	drv.InjectFault(0, cuda.ErrorIllegalAddress)
	err = lat.Reshape(ctx, 32)
	require.ErrorIs(t, err, ErrDeviceLost)
	require.False(t, p.Health().Healthy())
	_, err = other.Alloc(ctx, 1)
	require.ErrorIs(t, err, ErrDeviceLost)
	require.NoError(t, lat.Close())
	require.NoError(t, other.Close())
	require.NoError(t, p.Close())
	require.Zero(t, drv.Live().GreenCtxs, "the pool's close destroys what was kept")
}

// A launch-rate limit is threads per refill period of the tenant's SMs: a
// tenant that grows from 8 to 32 SMs is admitted four times the threads per
// period at the same WithSMLimit, and back to 8 a quarter (it stayed the
// 8-SM budget before). A GPU share is of the device's time: unchanged.
func TestReshapeResizesTheLaunchRateLimit(t *testing.T) {
	p, _ := openSim(t)
	var clk simClock
	tn, err := p.NewTenant("t", WithSMs(8), WithReshapeSizes(32), WithSMLimit(0.5), withClock(clk.now))
	require.NoError(t, err)
	defer tn.Close()
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	block := Dim3{X: 256, Y: 1, Z: 1}
	fits := func() int { // launches of one block admitted in a full bucket, the clock stopped
		clk.advance(time.Second)
		n := 0
		for tn.Stream().TryLaunch(fn, one, block, 0, &a) == nil {
			n++
		}
		return n
	}
	at8 := fits()
	require.Positive(t, at8)
	require.NoError(t, tn.Reshape(t.Context(), 32))
	at32 := fits()
	// Whole launches: 4x the 8-SM count, up to the remainder 4x leaves.
	require.True(t, at32 >= 4*at8 && at32 < 4*(at8+1), "at 8 SMs %d launches to a bucket, at 32 SMs %d", at8, at32)
	require.NoError(t, tn.Reshape(t.Context(), 8))
	require.Equal(t, at8, fits())

	share, err := p.NewTenant("s", WithSMs(8), WithReshapeSizes(16), WithGPUShare(0.5))
	require.NoError(t, err)
	defer share.Close()
	require.NoError(t, share.Reshape(t.Context(), 16))
	require.Equal(t, 0.5, share.Stats().GPUShare)
}

// Issue 38 #13: what the tenant's shape is (Partitioned, SMShare,
// ReshapeSizes) is read from Stats, where it was three methods of Tenant;
// a reshapable tenant's sizes cost its Stats no garbage, and a tenant that
// cannot be reshaped lists none.
func TestShapeInStats(t *testing.T) {
	p, _ := openSim(t)
	lat, batch := tradePair(t, p)
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	s := lat.Stats()
	require.True(t, s.Partitioned)
	require.InDelta(t, 8.0/132, s.SMShare, 1e-9)
	require.NoError(t, batch.Reshape(context.Background(), 100))
	require.NoError(t, lat.Reshape(context.Background(), 32))
	s = lat.Stats()
	require.Equal(t, []int{8, 16, 32}, s.ReshapeSizes, "the sizes do not change with the current one")
	require.InDelta(t, 32.0/132, s.SMShare, 1e-9)
	require.Equal(t, []int{100, 124}, batch.Stats().ReshapeSizes)
	ps := plain.Stats()
	require.False(t, ps.Partitioned)
	require.Nil(t, ps.ReshapeSizes)
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = lat.Stats() }))
	var all PoolStats
	p.ReadStats(&all)
	require.Zero(t, testing.AllocsPerRun(100, func() { p.ReadStats(&all) }))
}

// A Synchronize in flight does not hold a Reshape back: it waits on the
// old layout's stream, which stays valid until the tenant closes and holds
// all that was queued before the wait, and work queued after the Reshape
// waits for it on the new stream. Close still waits for the Synchronize.
// Measured on an H100 (run A2, 2026-12-06): each move that grew a latency
// class waited 2-7 ms for the batch class's Synchronize of a GEMM pair,
// while the burst's requests ran on 16 SMs.
func TestReshapeDoesNotWaitForASynchronize(t *testing.T) {
	p, drv := openSim(t, WithHostWait(time.Microsecond)) // a polled wait: a held stream holds it
	ctx := context.Background()
	lat, batch := tradePair(t, p)
	st := batch.Stream()
	old := st.Handle()
	inFlight := func(synced chan error) {
		t.Helper()
		queries := drv.Calls("cuStreamQuery")
		go func() { synced <- st.Synchronize() }()
		require.Eventually(t, func() bool { return drv.Calls("cuStreamQuery") > queries+2 }, 5*time.Second, time.Millisecond)
	}
	drv.HoldEvents(true)
	t.Cleanup(func() { drv.HoldEvents(false) }) // before the pool's Close, where the test fails
	synced := make(chan error, 1)
	inFlight(synced)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	require.NoError(t, batch.Reshape(rctx, 100), "a Synchronize in flight does not hold it back")
	require.NoError(t, lat.Reshape(rctx, 32))
	require.NotEqual(t, old, st.Handle())
	select {
	case err := <-synced:
		t.Fatalf("the Synchronize returned while its stream's work was held: %v", err)
	default:
	}
	drv.HoldEvents(false)
	require.NoError(t, <-synced)
	// Close waits for a Synchronize in flight.
	drv.HoldEvents(true)
	inFlight(synced)
	closed := make(chan error, 1)
	go func() { closed <- batch.Close() }()
	requireNoneWithin(t, closed, 50*time.Millisecond, "Close returned with a Synchronize in flight")
	drv.HoldEvents(false)
	require.NoError(t, <-synced)
	require.NoError(t, <-closed)
	require.NoError(t, lat.Close())
	requireNoGreenHeld(t, p, drv)
	require.Zero(t, drv.Live().Streams)
}

// A Reshape that grows takes SMs another tenant gave up only once the work
// that tenant queued before has run, at most smmove.HandOffMax later, and its own
// calls go on meanwhile; ctx ending the wait changes nothing.
func TestGrowingReshapeWaitsForTheGiversWork(t *testing.T) {
	p, drv := openSim(t)
	const bound = 200 * time.Millisecond // HandOffMax's 15 ms is shorter than a loaded host's stalls
	p.moves.SetHandOff(bound)
	ctx := context.Background()
	lat, batch := tradePair(t, p) // 8 and 124 SMs
	drv.HoldEvents(true)          // the work queued before a Reshape never ends
	t.Cleanup(func() { drv.HoldEvents(false) })
	require.NoError(t, batch.Reshape(ctx, 100), "a shrink does not wait")

	// Held work: the growth waits out the bound, the tenant's Dos do not.
	grown := make(chan error, 1)
	began := time.Now()
	go func() { grown <- lat.Reshape(ctx, 32) }()
	requireNoneWithin(t, grown, bound/4, "grown onto SMs whose giver's work still runs")
	require.NoError(t, lat.Do(ctx, func(Current) error { return nil }))
	select {
	case <-grown:
		t.Fatal("a Do during the wait was held back until the Reshape ended")
	default:
	}
	require.NoError(t, <-grown)
	require.GreaterOrEqual(t, time.Since(began), bound)
	require.Equal(t, 32, lat.SMs())

	// The giver's work runs out mid-wait: the growth follows it.
	require.NoError(t, lat.Reshape(ctx, 8))
	go func() { grown <- batch.Reshape(ctx, 124) }()
	requireNoneWithin(t, grown, bound/4, "grown onto SMs whose giver's work still runs")
	drv.HoldEvents(false)
	require.NoError(t, <-grown)
	require.Equal(t, 124, batch.SMs())

	// ctx ends the wait: nothing changes.
	p.moves.SetHandOff(time.Minute) // the cancel comes inside the wait, however slow the host
	drv.HoldEvents(true)
	require.NoError(t, batch.Reshape(ctx, 100))
	cctx, cancel := context.WithCancel(ctx)
	go func() { grown <- lat.Reshape(cctx, 32) }()
	requireNoneWithin(t, grown, smmove.HandOffMax/8, "grown onto SMs whose giver's work still runs")
	cancel()
	require.ErrorIs(t, <-grown, context.Canceled)
	require.Equal(t, 8, lat.SMs())
	require.Equal(t, 24, p.Stats().FreeSMs)
	drv.HoldEvents(false)
	require.NoError(t, lat.Reshape(ctx, 32))
	require.Zero(t, p.Stats().FreeSMs)
}

// Close races a growing Reshape's wait for the giver's work, of the
// grower or of the giver: every call returns, the grower's Reshape either
// grew or says ErrClosed, and the SMs add up.
func TestCloseRacesAGrowthsHandOff(t *testing.T) {
	for _, closeGiver := range []bool{false, true} {
		p, drv := openSim(t)
		ctx := context.Background()
		lat, batch := tradePair(t, p)
		drv.HoldEvents(true)
		require.NoError(t, batch.Reshape(ctx, 100))
		grown := make(chan error, 1)
		go func() { grown <- lat.Reshape(ctx, 32) }()
		time.Sleep(smmove.HandOffMax / 8)
		closing := lat
		if closeGiver {
			closing = batch
		}
		require.NoError(t, closing.Close())
		err := <-grown
		if closeGiver {
			require.NoError(t, err, "a closed giver leaves nothing to wait for")
			require.Equal(t, 32, lat.SMs())
		} else if err != nil {
			require.ErrorIs(t, err, ErrClosed)
		}
		drv.HoldEvents(false)
		require.NoError(t, errors.Join(lat.Close(), batch.Close()))
		require.Equal(t, 132, p.Stats().FreeSMs)
		requireNoGreenHeld(t, p, drv)
	}
}
