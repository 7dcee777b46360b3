package fcsp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// holdSpin makes the simulator's spin kernel block until release is
// closed, so a launch stays in flight for as long as a test needs.
func holdSpin(t *testing.T, drv *fake.Driver) (started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	drv.RegisterKernel("spin", func(*fake.Memory, cuda.Dim3, cuda.Dim3, []byte, []uint32) error {
		close(started)
		<-release
		return nil
	})
	return started, release
}

func TestShutdownGivesUpAtTheDeadline(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	fn := spinKernel(t, a)
	started, release := holdSpin(t, drv)
	launched := make(chan error, 1)
	go func() {
		var args Args
		one := Dim3{X: 1, Y: 1, Z: 1}
		launched <- a.Stream().Launch(context.Background(), fn, one, one, 0, args.Uint64(1))
	}()
	<-started

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, a.Shutdown(ctx), context.DeadlineExceeded, "a launch in flight holds Close")
	close(release)
	require.NoError(t, <-launched)
	// The close carried on and finishes.
	require.Eventually(t, func() bool { return len(p.Tenants()) == 0 }, 5*time.Second, time.Millisecond)
	require.ErrorIs(t, a.Stream().Launch(context.Background(), fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 1, Y: 1, Z: 1}, 0, nil), ErrClosed)

	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	require.ErrorIs(t, p.Shutdown(done), context.Canceled, "an ended ctx closes nothing")
	require.NoError(t, p.Shutdown(context.Background()))
}

func TestScopeDoesNotRunWithAnEndedContext(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	err = a.Scope(ctx, func(*Scope) error { ran = true; return nil })
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ran)
	require.NoError(t, a.Scope(context.Background(), func(s *Scope) error {
		_, err := s.Alloc(1 << 20)
		require.Equal(t, context.Background(), s.Context())
		return err
	}))
	require.Zero(t, a.Stats().MemoryUsed, "freed at the scope's end")
}

func TestSynchronizeContext(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, a.Stream().SynchronizeContext(ctx))
	cancel()
	require.True(t, errors.Is(a.Stream().SynchronizeContext(ctx), context.Canceled))
}

func TestFreeContext(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	buf, err := a.Alloc(context.Background(), 1<<20)
	require.NoError(t, err)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, a.FreeContext(ended, buf), context.Canceled)
	require.Equal(t, uint64(1<<20), a.Stats().MemoryUsed, "an ended ctx frees nothing")
	live, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	require.NoError(t, a.FreeContext(live, buf))
	require.Zero(t, a.Stats().MemoryUsed)
	require.ErrorIs(t, a.FreeContext(live, buf), ErrUnknownPointer)
}

// Issue 37 on the simulator: TestGPUShutdownOrder's round (a partition, a
// plain tenant, a pooled one, each allocating), repeated beside a pool
// that holds the primary context. The simulated driver keeps memory for
// each green context made while the primary context lives, as the H100
// does (fake.GreenCtxCost); the pools reuse the process's green contexts,
// so only the first round costs it.
func TestPoolsReopenedCostGreenMemoryOnce(t *testing.T) {
	checkLockOrder(t)
	f := fake.New(fake.H200())
	fake.RegisterKernels(f)
	open := func() *Pool {
		p, err := Open(context.Background(), 0, withDriver(func() cuda.Driver { return cuda.NewGuard(f, lockWatch{}) }, true))
		require.NoError(t, err)
		return p
	}
	// The primary context held beside the pools (one pool at a time hands
	// out a device's SMs: a bare Device holds it).
	probe, err := smpart.Open(f, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, probe.Close()) }()
	free := func() uint64 { // the driver's figure, not the pool's cached one
		n, _, err := f.MemGetInfo(probe.Primary())
		require.NoError(t, err)
		return n
	}
	before := free()
	var afterFirst uint64
	for round := range 4 {
		p := open()
		for i, opts := range [][]TenantOption{{WithSMs(16)}, {}, {WithMemoryPool(0), WithMemoryQuota(1 << 30)}} {
			tn, err := p.NewTenant(string(rune('a'+i)), opts...)
			require.NoError(t, err)
			require.NoError(t, tn.Do(context.Background(), func(Current) error { return nil }))
			ptr, err := tn.Alloc(context.Background(), 32<<20)
			require.NoError(t, err)
			require.NoError(t, tn.Free(ptr))
		}
		require.NoError(t, p.Close(), "round %d", round)
		if round == 0 {
			afterFirst = free()
			require.Less(t, afterFirst, before, "the first round's green contexts cost memory")
			continue
		}
		require.Equal(t, afterFirst, free(), "round %d: %d MiB more kept by the driver", round, (afterFirst-free())>>20)
	}
}
