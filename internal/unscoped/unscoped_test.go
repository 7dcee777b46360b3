package unscoped_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/unscoped"
)

const primary cuda.Context = 7

// The driver that takes calls with no context: every call runs with none,
// and nothing is told.
func TestProbeLearnsYes(t *testing.T) {
	var p unscoped.Probe
	require.Equal(t, unscoped.Unknown, p.State())
	var told []string
	for range 3 {
		require.NoError(t, p.Do(primary, func(m string) { told = append(told, m) }, func(ctx cuda.Context) error {
			require.Zero(t, ctx)
			return nil
		}))
	}
	require.Equal(t, unscoped.Yes, p.State())
	require.True(t, p.Yes())
	require.Empty(t, told)
}

// The driver that wants a context: the first call runs twice (refused,
// then with the fallback), later ones once, with the fallback; the
// refusal is told once, however many calls race to learn it.
func TestProbeLearnsNo(t *testing.T) {
	for _, refusal := range []error{cuda.ErrorInvalidContext, cuda.ErrorInvalidHandle} {
		var p unscoped.Probe
		var mu sync.Mutex
		var told []string
		var calls, unscopedCalls int
		f := func(ctx cuda.Context) error {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if ctx == 0 {
				unscopedCalls++
				return refusal
			}
			require.Equal(t, primary, ctx)
			return nil
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				require.NoError(t, p.Do(primary, func(m string) { mu.Lock(); told = append(told, m); mu.Unlock() }, f))
			})
		}
		wg.Wait()
		require.Equal(t, unscoped.No, p.State())
		require.False(t, p.Yes())
		require.Equal(t, []string{unscoped.Refusal}, told, "told once")
		require.Equal(t, 8, calls-unscopedCalls, "every call ran with the fallback once")
		before := unscopedCalls
		require.NoError(t, p.Do(primary, nil, f))
		require.Equal(t, before, unscopedCalls, "once learned, no call goes without a context")
	}
}

// Any other failure is f's, and teaches nothing.
func TestProbeKeepsOtherErrors(t *testing.T) {
	var p unscoped.Probe
	boom := errors.New("boom")
	err := p.Do(primary, nil, func(cuda.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, unscoped.Unknown, p.State())
	require.Equal(t, "unknown", p.State().String())
}
