package fcsp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/stretchr/testify/require"
)

// TestStreamClose: a server that makes a stream per request closes it at
// the end; the stream is destroyed, its cached blocks go back to the pool,
// and the tenant does not accumulate streams.
func TestStreamClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []TenantOption
	}{
		{"partitioned", []TenantOption{WithSMs(8), WithMemoryPool(0)}},
		{"unpartitioned", []TenantOption{WithMemoryPool(0)}},
		{"no pool", []TenantOption{WithSMs(8)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, drv := openSim(t)
			tn, err := p.NewTenant("a", tc.opts...)
			require.NoError(t, err)
			fn := spinKernel(t, tn)
			var a Args
			a.Uint64(0)
			one := Dim3{X: 1, Y: 1, Z: 1}
			ctx := context.Background()
			for range 50 { // requests
				s, err := tn.NewStream(ClassDefault)
				require.NoError(t, err)
				ptr, err := tn.AllocAsync(s, 3<<20)
				require.NoError(t, err)
				require.NoError(t, s.Launch(ctx, fn, one, one, 0, &a))
				require.NoError(t, tn.FreeAsync(s, ptr))
				h := s.c.h()
				require.NoError(t, s.Close())
				require.NoError(t, s.Close(), "idempotent")
				// Kept idle (in the partition, or the device's for a
				// primary-context stream): the next NewStream takes it back
				// without a driver call.
				require.NoError(t, drv.StreamSynchronize(tn.c.cctx(), h))
				require.ErrorIs(t, s.Launch(ctx, fn, one, one, 0, &a), ErrClosed)
				require.ErrorIs(t, s.Synchronize(), ErrClosed)
				_, err = tn.AllocAsync(s, 1)
				require.ErrorIs(t, err, ErrClosed)
				require.ErrorIs(t, tn.FreeAsync(s, ptr), ErrClosed)
			}
			st := tn.Stats()
			require.Equal(t, 1, st.Streams, "closed streams leave the tenant")
			require.Zero(t, st.MemoryCached, "a closed stream's blocks went back to the pool")
			require.Zero(t, st.MemoryUsed)
			require.ErrorIs(t, tn.Stream().Close(), ErrInvalidArgument, "the first stream lives with the tenant")
			require.NoError(t, tn.Trim())
			require.Zero(t, drv.Live().Bytes)

			last, err := tn.NewStream(ClassDefault)
			require.NoError(t, err)
			require.NoError(t, tn.Close())
			require.NoError(t, last.Close(), "after the tenant: nothing left to do")
		})
	}
}

// TestAdoptedStreamCloseForgetsIt: the SDK does not destroy a stream it
// did not make.
func TestAdoptedStreamCloseForgetsIt(t *testing.T) {
	p, drv := openSim(t)
	tn, err := p.NewTenant("a")
	require.NoError(t, err)
	h, err := drv.StreamCreate(p.dev.Primary(), cuda.StreamNonBlocking)
	require.NoError(t, err)
	s, err := tn.Adopt(uintptr(h), ClassNCCL)
	require.NoError(t, err)
	require.Equal(t, 2, tn.Stats().Streams)
	require.NoError(t, s.Close())
	require.Equal(t, 1, tn.Stats().Streams)
	require.NoError(t, drv.StreamSynchronize(p.dev.Primary(), h), "still its owner's")
	require.NoError(t, drv.StreamDestroy(p.dev.Primary(), h))
}

// A launch builds no closure and allocates nothing, rate-limited or not,
// partitioned or not, metered under a GPU share or not (the simulator's
// launch allocates nothing either); nor does TryLaunch.
func TestLaunchAllocatesNothing(t *testing.T) {
	p, _ := openSim(t)
	for i, opts := range [][]TenantOption{{WithSMs(8)}, {WithSMs(8), WithSMLimit(1)}, nil, {WithGPUShare(1)}, {WithSMs(8), WithGPUShare(1)}} {
		// Named by index: an earlier one, unreachable, may have been
		// collected and closed, shrinking len(p.Tenants()).
		tn, err := p.NewTenant(fmt.Sprint("t", i), opts...)
		require.NoError(t, err)
		fn := spinKernel(t, tn)
		var a Args
		a.Uint64(0)
		one := Dim3{X: 1, Y: 1, Z: 1}
		ctx := context.Background()
		s := tn.Stream()
		require.NoError(t, s.Launch(ctx, fn, one, one, 0, &a)) // the probe
		allocs := testing.AllocsPerRun(200, func() {
			if err := s.Launch(ctx, fn, one, one, 0, &a); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "tenant %v", opts)
		allocs = testing.AllocsPerRun(200, func() {
			if err := s.TryLaunch(fn, one, one, 0, &a); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "TryLaunch, tenant %v", opts)
		require.ErrorIs(t, s.Launch(ctx, fn, one, one, 0, nil), ErrInvalidArgument)
		require.ErrorIs(t, s.TryLaunch(fn, one, one, 0, nil), ErrInvalidArgument)
		// The handle is kept to here: a tenant nothing refers to is closed
		// when collected, and the launches above go through s alone.
		runtime.KeepAlive(tn)
	}
}

// TestCloseWaitsForALaunchInAdmission: admission runs inside the tenant's
// life lock and Close closes the limiter before it waits for calls in
// flight, so a launch waiting for tokens returns ErrClosed, launching
// nothing, before Close returns.
func TestCloseWaitsForALaunchInAdmission(t *testing.T) {
	p, drv := openSim(t, WithLimiterTuning(LimiterTuning{ThrottlePenalty: NoThrottlePenalty}))
	// 1% of 8 SMs x 2048 threads: 164 tokens a ms into buckets that start
	// full (16384 tokens); on a clock that stands still, none: the second
	// launch waits however long the host takes to get it there.
	var clk simClock
	tn, err := p.NewTenant("a", WithSMs(8), WithSMLimit(0.01), withClock(clk.now))
	require.NoError(t, err)
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	one := Dim3{X: 1, Y: 1, Z: 1}
	s := tn.Stream()
	ctx := context.Background()
	require.NoError(t, s.Launch(ctx, fn, Dim3{X: 20000, Y: 1, Z: 1}, one, 0, &a)) // empties the buckets
	launches := drv.Calls("cuLaunchKernel")
	started := make(chan struct{})
	var returned atomic.Bool
	errc := make(chan error, 1)
	go func() {
		var b Args
		b.Uint64(0)
		close(started)
		err := s.Launch(ctx, fn, Dim3{X: 10000, Y: 1, Z: 1}, one, 0, &b) // no tokens come: Close comes first
		returned.Store(true)
		errc <- err
	}()
	<-started
	time.Sleep(500 * time.Microsecond) // into the token wait
	require.False(t, returned.Load(), "the launch did not wait for tokens: the test proves nothing")
	require.NoError(t, tn.Close()) // wakes the waiting launch, then waits for it to leave
	require.True(t, returned.Load(), "Close returned while a launch was still inside admission")
	require.ErrorIs(t, <-errc, ErrClosed, "Close wakes a launch waiting for tokens with ErrClosed")
	require.Equal(t, launches, drv.Calls("cuLaunchKernel"), "the woken launch launched nothing")
}

// A stream query's "not ready", which a polled Synchronize hears thousands
// of times a request, passes the pool's fault watch without garbage: the
// watch's errors.As made its target escape, 16 bytes a poll (12 MB/s in the
// H200 storm with -wait 5ms, none of it seen by hostwait's own test, which
// polls the driver unguarded).
func TestNotReadyPassesTheWatchWithoutGarbage(t *testing.T) {
	p, drv := openSim(t)
	tn, err := p.NewTenant("t", WithSMs(8))
	require.NoError(t, err)
	s := tn.Stream().c.h()
	drv.HoldEvents(true)
	defer drv.HoldEvents(false)
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	one := Dim3{X: 1, Y: 1, Z: 1}
	require.NoError(t, tn.Stream().Launch(context.Background(), fn, one, one, 0, &a))
	allocs := testing.AllocsPerRun(200, func() {
		if err := p.drv.StreamQuery(0, s); !errors.Is(err, cuda.ErrorNotReady) {
			t.Fatalf("query of held work: %v", err)
		}
	})
	require.Zero(t, allocs)
	runtime.KeepAlive(tn)
}
