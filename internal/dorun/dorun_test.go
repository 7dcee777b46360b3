package dorun_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/dorun"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// tenant is a dorun.Tenant without the face: its calls are counted in
// calls (a refusal set in closed), its function is given the In itself.
type tenant struct {
	drv     *fake.Driver
	dev     *smpart.Device
	pl      place.Placement
	adm     *admission.Tenant
	threads inside.Threads
	calls   atomic.Int32
	closed  atomic.Bool
}

func (t *tenant) Enter() (uint32, error) {
	if t.closed.Load() {
		return 0, errs.ErrClosed
	}
	t.calls.Add(1)
	return 7, nil
}
func (t *tenant) Exit(tok uint32) {
	if tok != 7 {
		panic("a token Enter did not give")
	}
	t.calls.Add(-1)
}
func (t *tenant) Parts() dorun.Parts {
	return dorun.Parts{Placement: t.pl, Threads: &t.threads, Admission: t.adm, Device: t.dev, Raw: t.drv}
}
func (t *tenant) Fail(op string, err error) error { return fmt.Errorf("%s: %w", op, err) }
func (t *tenant) Current(in dorun.In) dorun.In    { return in }

// Its host's: an unmetered admission needs none of it.
func (t *tenant) Closed() bool            { return t.closed.Load() }
func (t *tenant) Primary() cuda.Context   { return t.dev.Primary() }
func (t *tenant) AnyThread() cuda.Context { return t.pl.AnyThread() }
func (t *tenant) Log(string)              {}

// newTenant is a tenant on a partition of 16 SMs with slots green
// contexts (slots 0: on the whole device instead), unmetered.
func newTenant(t *testing.T, slots int) *tenant {
	t.Helper()
	drv := fake.New(fake.H200())
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	tn := &tenant{drv: drv, dev: dev, pl: place.Whole{Dev: dev, N: 132}}
	if slots > 0 {
		s, err := dev.Split(8)
		require.NoError(t, err)
		part, err := s.Take(16)
		require.NoError(t, err)
		part.SetSlots(slots)
		tn.pl = place.NewGreen(part)
	}
	var prio admission.Pool
	tn.adm, err = admission.NewTenant(&prio, admission.Config{SMs: 16, ThreadsPerSM: 2048, Events: drv, Host: tn})
	require.NoError(t, err)
	return tn
}

// A Do runs f on its thread with one of the partition's green contexts
// current, counted in the life lock and among the threads inside, and
// puts it all back after: the thread's context, the count, the thread.
// f's error is returned as it is, the Do's own named with op.
func TestDo(t *testing.T) {
	tn := newTenant(t, 2)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the test's own, so that the thread's context can be read after
		defer runtime.UnlockOSThread()
		require.NoError(t, tn.drv.CtxSetCurrent(tn.dev.Primary()))
		fErr := errors.New("f's own")
		err := dorun.Do(ctx, tn, "Do", func(in dorun.In) error {
			cur, err := tn.drv.CtxGetCurrent()
			require.NoError(t, err)
			require.Equal(t, in.Cur, cur)
			require.NotEqual(t, tn.dev.Primary(), cur, "a green context")
			require.EqualValues(t, 1, tn.calls.Load())
			require.True(t, in.Live(&tn.threads))
			require.True(t, tn.threads.Here())
			require.Nil(t, in.Run, "unmetered")
			require.Zero(t, in.SMs)
			return fErr
		}, false)
		require.Same(t, fErr, err)
		cur, err := tn.drv.CtxGetCurrent()
		require.NoError(t, err)
		require.Equal(t, tn.dev.Primary(), cur, "the thread's context is back")
		require.NoError(t, tn.drv.CtxSetCurrent(0))
	}()
	<-done
	require.Zero(t, tn.calls.Load())
	require.True(t, tn.threads.Idle())

	tn.closed.Store(true)
	ran := false
	err := dorun.Do(ctx, tn, "TryDo", func(dorun.In) error { ran = true; return nil }, true)
	require.ErrorIs(t, err, errs.ErrClosed)
	require.EqualError(t, err, "TryDo: "+errs.ErrClosed.Error(), "its own error, named")
	require.False(t, ran)
}

// A panic in f goes on in the caller, with everything given back; a Do
// that cannot take a context (ctx ended while every one is held) names
// its error, or leaves it bare for op "".
func TestDoPanicAndTake(t *testing.T) {
	tn := newTenant(t, 1)
	require.PanicsWithValue(t, "boom", func() {
		_ = dorun.Do(context.Background(), tn, "Do", func(dorun.In) error { panic("boom") }, false)
	})
	require.Zero(t, tn.calls.Load())
	require.True(t, tn.threads.Idle())

	hold, release, held := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(held)
		_ = dorun.Do(context.Background(), tn, "Do", func(dorun.In) error {
			close(hold)
			<-release
			return nil
		}, false)
	}()
	<-hold
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := dorun.Do(ctx, tn, "Do", func(dorun.In) error { return nil }, false)
	require.EqualError(t, err, "Do: "+context.Canceled.Error())
	err = dorun.OnThread(ctx, tn, "", func(dorun.In) error { return nil }, nil, false)
	require.Same(t, context.Canceled, err, "bare for op \"\"")
	close(release)
	<-held
}

// Each runs f once in every context a Do may hold, all held at once;
// on the whole device, once.
func TestEach(t *testing.T) {
	for _, slots := range []int{0, 3} {
		tn := newTenant(t, slots)
		var mu sync.Mutex
		seen := map[cuda.Context]int{}
		err := dorun.Each(context.Background(), tn, func(in dorun.In) error {
			mu.Lock()
			seen[in.Cur]++
			mu.Unlock()
			return nil
		})
		require.NoError(t, err)
		require.Len(t, seen, max(slots, 1), "slots %d", slots)
		for cur, n := range seen {
			require.Equal(t, 1, n, "context %v", cur)
		}
		require.Zero(t, tn.calls.Load())
	}
}

// RunIn runs f in the context it is given, told its size, counted
// inside; WarmEvery runs it in every context of the placement.
func TestRunInAndWarmEvery(t *testing.T) {
	tn := newTenant(t, 2)
	var mu sync.Mutex
	seen := map[cuda.Context]int{}
	err := dorun.WarmEvery(tn, func(in dorun.In) error {
		require.True(t, tn.threads.Here())
		require.Equal(t, 16, in.SMs)
		mu.Lock()
		seen[in.Cur]++
		mu.Unlock()
		return nil
	})
	require.NoError(t, err)
	require.Len(t, seen, 2)
	require.Zero(t, tn.calls.Load())
	require.True(t, tn.threads.Idle())
}

// Warmup says failed, wrapping f's error, and turns a panic into one.
func TestWarmup(t *testing.T) {
	failed := errors.New("warm-up failed")
	own := errors.New("own")
	require.NoError(t, dorun.Warmup(func(int) error { return nil }, failed)(0))
	err := dorun.Warmup(func(int) error { return own }, failed)(0)
	require.ErrorIs(t, err, failed)
	require.ErrorIs(t, err, own)
	err = dorun.Warmup(func(int) error { panic("boom") }, failed)(0)
	require.ErrorIs(t, err, failed)
	require.ErrorContains(t, err, "it panicked: boom")
}
