package fcsp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/kernels"
	"github.com/stretchr/testify/require"
)

// Issue 29. The calls a server makes between requests (allocation, memory
// figures, streams, events, modules, metric scrapes) take none of a
// partition's green contexts, so a Do never waits behind them and they
// never wait behind a Do. Before the slots, MemGetInfo and NewStream took
// the partition's one exclusion and waited here for f; this test failed.
func TestServerCallsDoNotWaitForADo(t *testing.T) {
	p, drv := openSim(t)
	drv.RequireContext()
	a, err := p.NewTenant("a", WithSMs(16), WithConcurrentDos(1))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithSMs(16), WithConcurrentDos(1))
	require.NoError(t, err)

	release := make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	defer let()
	inF := make(chan struct{}, 2)
	var dos sync.WaitGroup
	for _, tn := range []*Tenant{a, b} {
		dos.Go(func() {
			require.NoError(t, tn.Do(context.Background(), func(Current) error {
				inF <- struct{}{}
				<-release // f holds the tenant's only green context until released
				return nil
			}))
		})
	}
	<-inF
	<-inF

	calls := map[string]func(tn *Tenant) error{
		"MemGetInfo": func(tn *Tenant) error { _, _, err := tn.MemGetInfo(); return err },
		"Alloc+Free": func(tn *Tenant) error {
			ptr, err := tn.Alloc(context.Background(), 1<<20)
			if err != nil {
				return err
			}
			return tn.Free(ptr)
		},
		"NewStream+Close": func(tn *Tenant) error {
			s, err := tn.NewStream(ClassDefault)
			if err != nil {
				return err
			}
			return s.Close()
		},
		"NewEvent+Close": func(tn *Tenant) error {
			e, err := tn.NewEvent()
			if err != nil {
				return err
			}
			return e.Close()
		},
		"LoadModule": func(tn *Tenant) error { _, err := tn.LoadModule(kernels.ChainPTX); return err },
		"Stats":      func(tn *Tenant) error { _ = tn.Stats(); _ = p.Stats(); return nil },
		"Synchronize": func(tn *Tenant) error {
			return tn.Stream().Synchronize()
		},
	}
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		for _, tn := range []*Tenant{a, b} {
			done := make(chan error, 1)
			go func() { done <- calls[name](tn) }()
			select {
			case err := <-done:
				require.NoError(t, err, "%s on %s", name, tn.Name())
			case <-time.After(10 * time.Second):
				let()
				t.Fatalf("%s on tenant %s waited for a Do of a partitioned tenant", name, tn.Name())
			}
		}
	}
	let()
	dos.Wait()
	require.Zero(t, drv.Overlaps())
}

// Under a storm of those calls on the tenant and its neighbour, Dos never
// wait for a green context: nothing else takes one. With one exclusion for
// all (before the slots) the Dos queued behind the storm's calls.
func TestDoDoesNotWaitBehindAStorm(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16), WithConcurrentDos(1))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithSMs(16))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var storm sync.WaitGroup
	var stormCalls atomic.Int64
	for i := range 4 {
		storm.Go(func() {
			for ctx.Err() == nil {
				for _, tn := range []*Tenant{a, b} {
					var err error
					switch i {
					case 0:
						_, _, err = tn.MemGetInfo()
					case 1:
						var ptr DevicePtr
						if ptr, err = tn.Alloc(ctx, 4096); err == nil {
							err = tn.Free(ptr)
						}
					case 2:
						var s *Stream
						if s, err = tn.NewStream(ClassDefault); err == nil {
							err = s.Close()
						}
					case 3:
						_ = tn.Stats()
					}
					if err != nil && ctx.Err() == nil {
						t.Error(err)
						return
					}
					stormCalls.Add(1)
				}
			}
		})
	}
	for range 300 {
		require.NoError(t, a.Do(context.Background(), func(Current) error { return nil }))
	}
	cancel()
	storm.Wait()
	w := a.Stats().ContextWait
	require.Equal(t, uint64(300), w.Calls)
	require.Zero(t, w.Waited, "a Do waited for a green context with no other Do running (%d storm calls)", stormCalls.Load())
	require.Zero(t, drv.Overlaps())
}

// Only the calls that need a green context current get one: Do (by
// CtxSwapCurrent, not counted here) and graph capture and instantiation.
// The fake counts the calls made with a green context pushed.
func TestOnlyDoAndGraphsTakeAGreenContext(t *testing.T) {
	p, drv := openSim(t)
	drv.RequireContext()
	a, err := p.NewTenant("a", WithSMs(16), WithGPUMetering())
	require.NoError(t, err)
	ctx := context.Background()
	fn := spinKernel(t, a)
	s, err := a.NewStream(ClassAttention)
	require.NoError(t, err)
	ptr, err := a.Alloc(ctx, 1<<20)
	require.NoError(t, err)
	require.NoError(t, a.CopyToDevice(ptr, make([]byte, 64)))
	require.NoError(t, a.CopyFromDevice(make([]byte, 64), ptr))
	_, _, err = a.MemGetInfo()
	require.NoError(t, err)
	var args Args
	args.Uint64(0)
	require.NoError(t, s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args))
	require.NoError(t, s.Synchronize())
	e, err := a.NewEvent()
	require.NoError(t, err)
	require.NoError(t, e.Record(s))
	require.NoError(t, e.Synchronize())
	require.NoError(t, e.Close())
	require.NoError(t, a.Do(ctx, func(cur Current) error {
		_, err := cur.Stream(s)
		return err
	}))
	_ = a.Stats()
	require.NoError(t, a.Free(ptr))
	require.NoError(t, s.Close())
	inGreen := drv.GreenContextCalls()
	delete(inGreen, "cuCtxSetCurrent") // Do's own switch to its slot
	require.Empty(t, inGreen, "calls made in a green context that the primary context serves")

	s = a.Stream()
	g, err := s.Capture(ctx, func() error { return s.Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 32, Y: 1, Z: 1}, 0, &args) })
	require.NoError(t, err)
	x, err := g.Instantiate()
	require.NoError(t, err)
	got := drv.GreenContextCalls()
	for op := range got {
		require.Contains(t, []string{"cuCtxSetCurrent", "cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags"}, op)
	}
	require.NotZero(t, got["cuGraphInstantiateWithFlags"], "a graph is instantiated in a green context: it keeps that context's SMs")
	require.NoError(t, errors.Join(x.Close(), g.Close()))
}

// K Dos of one partitioned tenant run at once, each with a green context of
// its own over the tenant's SMs, never one context on two threads. Before
// the slots the K functions ran one at a time: this test's barrier, which
// every f must reach before any returns, deadlocked.
func TestConcurrentDosEachHoldAGreenContext(t *testing.T) {
	for _, k := range []int{2, 8, 16} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			p, drv := openSim(t)
			a, err := p.NewTenant("a", WithSMs(16))
			require.NoError(t, err)
			var in sync.WaitGroup
			in.Add(k)
			all := make(chan struct{})
			go func() { in.Wait(); close(all) }()
			var mu sync.Mutex
			seen := map[cuda.Context]int{}
			done := make(chan error, k)
			for range k {
				go func() {
					done <- a.Do(context.Background(), func(cur Current) error {
						got, err := drv.CtxGetCurrent()
						if err != nil {
							return err
						}
						if !a.c.partition().Owns(got) || got != cuda.Context(cur.Context().Uintptr()) {
							return errors.New("f runs in a context that is not the tenant's, or not the one Current names")
						}
						mu.Lock()
						seen[got]++
						mu.Unlock()
						in.Done()
						select {
						case <-all:
							return nil
						case <-time.After(10 * time.Second):
							return errors.New("the Dos did not run at once")
						}
					})
				}()
			}
			for range k {
				require.NoError(t, <-done)
			}
			require.Len(t, seen, k, "each Do in flight had its own green context")
			require.Zero(t, drv.Overlaps())
			require.Zero(t, a.Stats().ContextWait.Waited)
		})
	}
}

// Past its limit, Dos wait for a green context in arrival order (no
// barging: a sync.Mutex lets a newcomer take a freed lock before a waiter
// for up to 1 ms), leave at once when their ctx ends, and the waits are in
// Stats.
func TestDosPastTheLimitWaitInArrivalOrder(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16), WithConcurrentDos(1))
	require.NoError(t, err)
	release := make(chan struct{})
	held := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- a.Do(context.Background(), func(Current) error { close(held); <-release; return nil })
	}()
	<-held
	const n = 6
	var order []int
	var mu sync.Mutex
	done := make(chan error, n)
	for i := range n {
		go func() {
			done <- a.Do(context.Background(), func(Current) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			})
		}()
		// The next arrives once this one waits.
		require.Eventually(t, func() bool { return waiters(a) == i+1 }, 10*time.Second, 100*time.Microsecond)
	}
	// One more whose ctx ends while it waits: it leaves, and takes no turn.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	require.ErrorIs(t, a.Do(ctx, func(Current) error { t.Error("ran"); return nil }), context.DeadlineExceeded)
	close(release)
	require.NoError(t, <-first)
	for range n {
		require.NoError(t, <-done)
	}
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, order)
	w := a.Stats().ContextWait
	require.Equal(t, uint64(1+n), w.Calls)
	require.Equal(t, uint64(n), w.Waited)
	require.Positive(t, w.P99)
	require.GreaterOrEqual(t, w.Max, w.P99)
}

// waiters counts the goroutines waiting for one of a's green contexts.
func waiters(a *Tenant) int { return int(a.c.partition().Waiting()) }

// With CUDA_DEVICE_MAX_CONNECTIONS=1 every stream shares one hardware work
// queue, and a partition isolates nothing (measured on the H200): the pool
// says so when a partition is asked for, and serves unpartitioned tenants.
func TestOneWorkQueueRefusesPartitions(t *testing.T) {
	p, _ := openSim(t, WithEnviron([]string{"CUDA_DEVICE_MAX_CONNECTIONS=1"}))
	require.Equal(t, 1, p.Stats().Device.WorkQueues)
	_, err := p.NewTenant("a", WithSMs(16))
	require.ErrorIs(t, err, ErrFewWorkQueues)
	require.ErrorContains(t, err, "CUDA_DEVICE_MAX_CONNECTIONS=1")
	shared, err := p.NewTenant("b")
	require.NoError(t, err)
	require.NoError(t, shared.Close())

	q, _ := openSim(t, WithEnviron([]string{"CUDA_DEVICE_MAX_CONNECTIONS=16"}))
	require.Equal(t, 16, q.Stats().Device.WorkQueues)
	a, err := q.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	require.NoError(t, a.Close())

	for _, bad := range []string{"0", "33", "many"} {
		_, err := openSimErr(0, WithEnviron([]string{"CUDA_DEVICE_MAX_CONNECTIONS=" + bad}))
		require.ErrorIs(t, err, ErrInvalidArgument, bad)
		require.ErrorContains(t, err, "1 to 32")
	}
}

// A metered partitioned tenant's Stats polls its streams' events with the
// primary context: a Do that never ends does not stop a scrape (issue 28
// #4; before, the polling took the partition's exclusion and waited).
func TestStatsDoNotWaitForAMeteredDo(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16), WithGPUShare(0.5), WithConcurrentDos(1))
	require.NoError(t, err)
	release := make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	defer let()
	inF := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Do(context.Background(), func(cur Current) error {
			if _, err := cur.Stream(nil); err != nil {
				return err
			}
			close(inF)
			<-release
			return nil
		})
	}()
	<-inF
	got := make(chan PoolStats, 1)
	go func() { got <- p.Stats() }()
	select {
	case s := <-got:
		require.Len(t, s.Tenants, 1)
	case <-time.After(10 * time.Second):
		let()
		t.Fatal("Pool.Stats waited for a metered tenant's Do")
	}
	let()
	require.NoError(t, <-done)
}
