package fcsp

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScopeFreesOnReturnErrorAndPanic(t *testing.T) {
	p, drv := openSim(t)
	tn, err := p.NewTenant("req", WithSMs(8))
	require.NoError(t, err)
	ctx := context.Background()

	require.NoError(t, tn.Scope(ctx, func(s *Scope) error {
		a, err := s.Alloc(1 << 20)
		require.NoError(t, err)
		_, err = s.Alloc(2 << 20)
		require.NoError(t, err)
		require.NoError(t, s.Free(a))
		require.ErrorIs(t, s.Free(a), ErrUnknownPointer)
		return nil
	}))
	require.Zero(t, tn.Stats().MemoryUsed, "left-overs are freed on return")

	boom := errors.New("handler failed")
	err = tn.Scope(ctx, func(s *Scope) error {
		_, err := s.Alloc(4 << 20)
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Zero(t, tn.Stats().MemoryUsed)

	require.PanicsWithValue(t, "handler panicked", func() {
		_ = tn.Scope(ctx, func(s *Scope) error {
			_, err := s.Alloc(8 << 20)
			require.NoError(t, err)
			panic("handler panicked")
		})
	})
	require.Zero(t, tn.Stats().MemoryUsed, "a panicking handler's memory comes back")
	require.NoError(t, tn.Trim()) // the pool gives what it keeps back to the driver
	require.Zero(t, drv.Live().Bytes)
}
