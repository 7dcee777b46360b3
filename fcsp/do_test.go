package fcsp

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/kernels"
)

// onLockedThread runs f on a goroutine locked to its own thread, with ctx
// made current there first, and returns what is current after f.
func onLockedThread(t *testing.T, drv *fake.Driver, before cuda.Context, f func()) cuda.Context {
	t.Helper()
	done := make(chan cuda.Context)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(t, drv.CtxSetCurrent(before))
		func() {
			defer func() { _ = recover() }()
			f()
		}()
		after, err := drv.CtxGetCurrent()
		require.NoError(t, err)
		require.NoError(t, drv.CtxSetCurrent(0))
		done <- after
	}()
	return <-done
}

func TestDoMakesTheTenantCurrentAndRestores(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	primary := p.dev.Primary()
	var inside cuda.Context
	var cur Current
	var h StreamHandle
	after := onLockedThread(t, drv, primary, func() {
		require.NoError(t, a.Do(context.Background(), func(c Current) error {
			var err error
			inside, err = drv.CtxGetCurrent()
			cur = c
			if err == nil {
				h, err = c.Stream(nil)
			}
			return err
		}))
	})
	require.Equal(t, cuda.Context(a.Context()), inside, "f runs with the green context current")
	require.Equal(t, primary, after, "the thread's context is restored")
	require.Equal(t, a.Context(), cur.Context().Uintptr())
	require.Equal(t, 16, cur.SMs())
	require.Equal(t, a.Stream().Handle(), h.Uintptr())
	_, err = cur.Stream(nil)
	require.ErrorIs(t, err, ErrInvalidArgument, "a Current used after its Do (issue 28 #13)")
	require.Equal(t, a.Stream().Handle(), uintptr(h.Pointer()))
	require.Equal(t, 0, drv.Overlaps())

	// f's error comes back as is; the tenant stays usable.
	boom := errors.New("boom")
	require.ErrorIs(t, a.Do(context.Background(), func(Current) error { return boom }), boom)
	require.NoError(t, a.Do(context.Background(), func(Current) error { return nil }))

	// An unpartitioned tenant's Do beside a partition makes a green
	// context of the commons current, over the SMs no partition holds
	// (issue 37); with no partition, the primary context.
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	require.NoError(t, b.Do(context.Background(), func(c Current) error {
		got, err := drv.CtxGetCurrent()
		require.True(t, p.moves.Commons().Owns(got))
		require.Equal(t, 132-16, c.SMs())
		return err
	}))
	require.NoError(t, a.Close())
	require.NoError(t, b.Do(context.Background(), func(c Current) error {
		got, err := drv.CtxGetCurrent()
		require.Equal(t, primary, got)
		require.Equal(t, 132, c.SMs())
		return err
	}))
}

func TestDoBadInput(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	b, err := p.NewTenant("b")
	require.NoError(t, err)
	err = a.Do(context.Background(), nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "nil function")
	//nolint:staticcheck // a nil context on purpose
	require.ErrorIs(t, a.Do(nil, func(Current) error { return nil }), ErrInvalidArgument)
	require.NoError(t, a.Do(context.Background(), func(cur Current) error {
		_, err := cur.Stream(b.Stream())
		require.ErrorIs(t, err, ErrInvalidArgument)
		_, err = cur.Workspace(b.Stream(), 1<<20)
		require.ErrorIs(t, err, ErrInvalidArgument)
		return nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	require.ErrorIs(t, a.Do(ctx, func(Current) error { ran = true; return nil }), context.Canceled)
	require.False(t, ran)

	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Do(context.Background(), func(Current) error { return nil }), ErrClosed)
}

func TestDoPanicReleasesRestoresAndRepanics(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	primary := p.dev.Primary()
	var recovered any
	after := onLockedThread(t, drv, primary, func() {
		defer func() { recovered = recover() }()
		_ = a.Do(context.Background(), func(Current) error { panic("in f") })
	})
	require.Equal(t, "in f", recovered, "the panic goes on")
	require.Equal(t, primary, after, "the thread's context is restored")
	// The exclusion was released: another thread's Do and the SDK's own
	// calls go through at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, a.Do(ctx, func(Current) error { return nil }))
	_, err = a.NewStream(ClassDefault)
	require.NoError(t, err)
	require.False(t, a.c.dos.Here())
	require.True(t, a.c.dos.Idle(), "a thread still counted inside")
	require.Equal(t, 0, drv.Overlaps())
	require.NoError(t, a.Close(), "the life lock was released: Close does not wait forever")
}

// Calls on the same tenant from inside f run on f's thread with the
// exclusion already held; before Hold nested they deadlocked.
func TestDoReentryRunsDirectly(t *testing.T) {
	p, drv := openSim(t, WithPartitionUnit(8))
	drv.RequireContext() // launches and waits take the partition's lock too
	a, err := p.NewTenant("a", WithSMs(16), WithMemoryPool(0))
	require.NoError(t, err)
	b, err := p.NewTenant("b", WithSMs(8))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- a.Do(ctx, func(cur Current) error {
			depth := 0
			if err := a.Do(ctx, func(Current) error {
				depth++
				got, err := drv.CtxGetCurrent()
				require.True(t, a.c.partition().Owns(got), "a green context of a's is current")
				return err
			}); err != nil {
				return err
			}
			require.Equal(t, 1, depth, "the nested Do ran its function")
			// Another tenant's Do switches the thread to its context and back.
			if err := b.Do(ctx, func(Current) error {
				got, err := drv.CtxGetCurrent()
				require.True(t, b.c.partition().Owns(got), "a green context of b's is current")
				return err
			}); err != nil {
				return err
			}
			got, err := drv.CtxGetCurrent()
			require.True(t, a.c.partition().Owns(got), "a's context is current again")
			require.NoError(t, err)
			// The SDK's calls on this tenant, each through the partition.
			mod, err := a.LoadModule(kernels.ChainPTX)
			if err != nil {
				return err
			}
			fn, err := mod.Function("chain")
			if err != nil {
				return err
			}
			s, err := a.NewStream(ClassDefault)
			if err != nil {
				return err
			}
			ws, err := cur.Workspace(s, 4*1000)
			if err != nil {
				return err
			}
			var args Args
			args.Ptr(ws.Ptr()).Int32(1000).Int32(3)
			if err := s.Launch(ctx, fn, Dim3{X: 4, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &args); err != nil {
				return err
			}
			if err := s.Synchronize(); err != nil {
				return err
			}
			if _, _, err := a.MemGetInfo(); err != nil {
				return err
			}
			return errors.Join(ws.Close(), s.Close())
		})
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Do re-entered from inside f deadlocked")
	}
	require.Equal(t, 0, drv.Overlaps())
	require.Equal(t, uint64(0), a.Stats().MemoryUsed)
}

func TestDoWaitsForTheExclusionAndHonoursCtx(t *testing.T) {
	p, drv := openSim(t)
	drv.RequireContext()
	a, err := p.NewTenant("a", WithSMs(16), WithConcurrentDos(1))
	require.NoError(t, err)
	inF, release := make(chan struct{}), make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	defer let() // a failed assertion must not leave f blocked (Close would wait for it)
	first := make(chan error, 1)
	go func() {
		first <- a.Do(context.Background(), func(Current) error {
			close(inF)
			<-release
			return nil
		})
	}()
	<-inF

	// Another Do waiting for the exclusion returns with ctx's error once
	// ctx ends, and f never runs.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
	defer cancel()
	ran := false
	start := time.Now()
	err = a.Do(ctx, func(Current) error { ran = true; return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ran)
	require.Less(t, time.Since(start), time.Second)

	// The SDK's other calls need no green context (docs/CONTEXTS.md): they
	// run while f holds the tenant's only one.
	_, err = a.NewStream(ClassDefault)
	require.NoError(t, err)
	let()
	require.NoError(t, <-first)
	require.Equal(t, 0, drv.Overlaps())
	// The abandoned waiter gave the exclusion back.
	require.NoError(t, a.Do(context.Background(), func(Current) error { return nil }))
}

func TestDoCloseInsideIsRefusedAndCloseWaitsForDo(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	require.NoError(t, a.Do(context.Background(), func(Current) error {
		err := a.Close()
		require.ErrorIs(t, err, ErrInsideDo)
		return nil
	}))
	// Still usable, then closable.
	require.NoError(t, a.Do(context.Background(), func(Current) error { return nil }))

	// Close from another goroutine waits for the f in flight, which keeps
	// its context alive to the end.
	inF, release := make(chan struct{}), make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	defer let()
	done := make(chan error, 1)
	go func() {
		done <- a.Do(context.Background(), func(cur Current) error {
			close(inF)
			<-release
			_, err := cur.Stream(nil)
			return err
		})
	}()
	<-inF
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	time.Sleep(time.Millisecond)
	select {
	case <-closed:
		t.Fatal("Close returned while f ran")
	default:
	}
	let()
	require.NoError(t, <-done)
	require.NoError(t, <-closed)
	require.ErrorIs(t, a.Do(context.Background(), func(Current) error { return nil }), ErrClosed)
}

// The fake's overlap detector works: without the exclusion, two threads
// with one green context current are seen.
func TestFakeSeesAGreenContextCurrentOnTwoThreads(t *testing.T) {
	p, drv := openSim(t)
	a, err := p.NewTenant("a", WithSMs(16))
	require.NoError(t, err)
	g := cuda.Context(a.Context())
	hold, done := make(chan struct{}), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		require.NoError(t, drv.CtxSetCurrent(g))
		close(hold)
		<-done
		require.NoError(t, drv.CtxSetCurrent(0))
	}()
	<-hold
	_, _, err = drv.MemGetInfo(g) // another thread, same green context
	require.NoError(t, err)
	close(done)
	require.Equal(t, 1, drv.Overlaps())
}

// A storm: Do on several goroutines while others allocate, free, launch and
// make streams on the same partitioned tenant; every call succeeds and the
// green context is never current on two threads.
func TestDoStormKeepsTheGreenContextOnOneThread(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		p, drv := openSim(t)
		if scoped {
			drv.RequireContext()
		}
		a, err := p.NewTenant("a", WithSMs(16), WithMemoryPool(0), WithMemoryQuota(1<<30))
		require.NoError(t, err)
		mod, err := a.LoadModule(kernels.ChainPTX)
		require.NoError(t, err)
		fn, err := mod.Function("chain")
		require.NoError(t, err)
		ctx := context.Background()
		together(t, 8, func(i int) error {
			for range 30 {
				switch i % 4 {
				case 0:
					if err := a.Do(ctx, func(cur Current) error {
						got, err := drv.CtxGetCurrent()
						if err != nil || !a.c.partition().Owns(got) {
							return errors.Join(err, errors.New("wrong context current in f"))
						}
						ws, err := cur.Workspace(nil, 1<<20)
						if err != nil {
							return err
						}
						// Stay a while, as a library call would, so that
						// the others' calls fall inside f.
						for range 20 {
							runtime.Gosched()
						}
						return ws.Close()
					}); err != nil {
						return err
					}
				case 1:
					ptr, err := a.Alloc(ctx, 4096)
					if err != nil {
						return err
					}
					if err := a.Free(ptr); err != nil {
						return err
					}
				case 2:
					ptr, err := a.Alloc(ctx, 4*256)
					if err != nil {
						return err
					}
					var args Args
					args.Ptr(ptr).Int32(256).Int32(2)
					err = errors.Join(a.Stream().Launch(ctx, fn, Dim3{X: 1, Y: 1, Z: 1}, Dim3{X: 256, Y: 1, Z: 1}, 0, &args), a.Stream().Synchronize(), a.Free(ptr))
					if err != nil {
						return err
					}
				case 3:
					s, err := a.NewStream(ClassDefault)
					if err != nil {
						return err
					}
					if err := s.Close(); err != nil {
						return err
					}
				}
			}
			return nil
		})
		require.Equal(t, 0, drv.Overlaps())
		require.Equal(t, uint64(0), a.Stats().MemoryUsed)
	}
}

func TestWorkspaceCountsAgainstTheQuota(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		p, _ := openSim(t)
		opts := []TenantOption{WithSMs(8), WithMemoryQuota(64 << 20)}
		if pooled {
			opts = append(opts, WithMemoryPool(0))
		}
		a, err := p.NewTenant("a", opts...)
		require.NoError(t, err)
		ctx := context.Background()
		ws, err := a.AllocWorkspace(ctx, nil, 32<<20)
		require.NoError(t, err)
		require.Equal(t, uint64(32<<20), ws.Size())
		require.Equal(t, uint64(32<<20), a.Stats().MemoryUsed)
		require.Equal(t, uintptr(ws.Ptr()), uintptr(ws.Pointer()))
		_, err = a.AllocWorkspace(ctx, nil, 40<<20)
		require.ErrorIs(t, err, ErrQuotaExceeded)
		_, err = a.AllocWorkspace(ctx, nil, 0)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.NoError(t, ws.Close())
		require.NoError(t, ws.Close(), "idempotent")
		require.Equal(t, uint64(0), a.Stats().MemoryUsed)
		// One left open is freed by the tenant's Close.
		_, err = a.AllocWorkspace(ctx, nil, 1<<20)
		require.NoError(t, err)
		require.NoError(t, a.Close())
		require.Equal(t, uint64(0), p.MemoryUsed())
	}
}
