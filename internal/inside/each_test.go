package inside

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every run holds its context until all n have run f: with n contexts
// handed out one per run, each f runs in a different one, and none is
// given back before the last f has run. Their errors are joined.
func TestEachHoldsUntilAll(t *testing.T) {
	const n = 4
	var mu sync.Mutex
	free := []int{0, 1, 2, 3}
	var running, most atomic.Int32
	do := func(ctx context.Context, _ int, f func(int) error) error {
		mu.Lock()
		if len(free) == 0 { // a run came back for a second context
			mu.Unlock()
			return errors.New("no context free")
		}
		c := free[0]
		free = free[1:]
		mu.Unlock()
		r := running.Add(1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		err := f(c)
		running.Add(-1)
		mu.Lock()
		free = append(free, c)
		mu.Unlock()
		return err
	}
	seen := make([]atomic.Int32, n)
	errOne := errors.New("run 1 failed")
	err := Each(context.Background(), n, do, func(c int) error {
		seen[c].Add(1)
		if c == 1 {
			return errOne
		}
		return nil
	})
	require.ErrorIs(t, err, errOne)
	require.EqualValues(t, n, most.Load(), "every run held its context at once")
	for c := range seen {
		require.EqualValues(t, 1, seen[c].Load(), "context %d", c)
	}
}

// A run that cannot start (its do returns without running f) ends the
// others' wait, which would otherwise be for it; its error is returned.
func TestEachOneCannotStart(t *testing.T) {
	var calls atomic.Int32
	refused := errors.New("refused")
	do := func(ctx context.Context, _ int, f func(int) error) error {
		if calls.Add(1) == 2 {
			time.Sleep(10 * time.Millisecond) // the others are waiting by now
			return refused
		}
		return f(0)
	}
	var ran atomic.Int32
	err := Each(context.Background(), 3, do, func(int) error { ran.Add(1); return nil })
	require.ErrorIs(t, err, refused)
	require.EqualValues(t, 2, ran.Load())
}

// ctx ending ends the runs' wait for each other: here the second run's
// do waits for ctx, so the first holds its context until ctx ends.
func TestEachContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	var calls atomic.Int32
	do := func(ctx context.Context, _ int, f func(int) error) error {
		if calls.Add(1) == 1 {
			return f(0)
		}
		<-ctx.Done()
		return ctx.Err()
	}
	require.ErrorIs(t, Each(ctx, 2, do, func(int) error { return nil }), context.DeadlineExceeded)
}

// A panic in a run ends the others' wait and goes on in Each's caller,
// once every run has returned; the runs' i number them 0 to n-1.
func TestEachPanicGoesOnInTheCaller(t *testing.T) {
	const n = 3
	var returned atomic.Int32
	var mu sync.Mutex
	seen := map[int]bool{}
	do := func(ctx context.Context, i int, f func(int) error) error {
		defer returned.Add(1)
		mu.Lock()
		seen[i] = true
		mu.Unlock()
		return f(i)
	}
	var got any
	func() {
		defer func() { got = recover() }()
		_ = Each(context.Background(), n, do, func(i int) error {
			if i == 1 {
				panic("boom")
			}
			return nil
		})
	}()
	require.Equal(t, "boom", got)
	require.EqualValues(t, n, returned.Load(), "every run returned before the panic went on")
	require.Len(t, seen, n)
}

// One Turn at a time; a waiter's ctx ends its wait.
func TestTurn(t *testing.T) {
	var turn Turn
	ctx := context.Background()
	require.NoError(t, turn.Take(ctx))
	short, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, turn.Take(short), context.DeadlineExceeded)
	took := make(chan struct{})
	go func() {
		_ = turn.Take(ctx)
		close(took)
	}()
	turn.Give()
	<-took
	turn.Give()
}
