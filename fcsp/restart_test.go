package fcsp

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// The fake's default is what the H200 does: a sticky fault outlives
// cuDevicePrimaryCtxReset_v2 (the next cuDevicePrimaryCtxRetain answers
// CUDA_ERROR_ILLEGAL_ADDRESS). Reset then refuses with a typed error that
// says the process must be restarted, the pool stays lost for every call,
// later Resets refuse at once, and Close is clean with nothing leaked.
func TestStickyFaultNeedsRestart(t *testing.T) {
	ctx := context.Background()
	p, drv := openSim(t)
	fs := newFaultSet(t, p)
	_, err := fs.tenants[0].Alloc(ctx, 1<<20)
	require.NoError(t, err)
	_, err = fs.tenants[1].Alloc(ctx, 1<<20)
	require.NoError(t, err)
	require.ErrorIs(t, faultOn(ctx, fs.tenants[2].Stream(), fs.fns[2]), ErrDeviceLost)

	err = p.Reset(ctx)
	require.ErrorIs(t, err, ErrDeviceLost)
	require.ErrorIs(t, err, cuda.ErrorIllegalAddress)
	var lost *DeviceLostError
	require.ErrorAs(t, err, &lost)
	require.True(t, lost.NeedsRestart)
	require.Contains(t, err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS")
	require.Contains(t, err.Error(), "exit and be restarted")
	h := p.Health()
	require.False(t, h.Healthy())
	require.True(t, h.NeedsRestart)
	require.Zero(t, h.Resets)
	resets := drv.Resets()

	// Every tenant, every call: still lost, the driver not asked again.
	for i, tn := range fs.tenants {
		_, err := tn.Alloc(ctx, 1)
		require.ErrorIs(t, err, ErrDeviceLost, "tenant %d Alloc", i)
		require.ErrorIs(t, chainOn(ctx, tn, tn.Stream(), fs.fns[i], 64, 2), ErrDeviceLost, "tenant %d chain", i)
		require.ErrorIs(t, tn.Stream().Synchronize(), ErrDeviceLost, "tenant %d Synchronize", i)
	}
	_, err = p.NewTenant("late")
	require.ErrorIs(t, err, ErrDeviceLost)
	err = p.Reset(ctx)
	require.ErrorIs(t, err, ErrDeviceLost)
	require.Contains(t, err.Error(), "exit and be restarted")
	require.Equal(t, resets, drv.Resets(), "a second Reset must refuse without resetting again")

	// Close races tenants' Close: clean, once each.
	var wg sync.WaitGroup
	errs := make([]error, len(fs.tenants)+1)
	for i, tn := range fs.tenants {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = tn.Close() }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); errs[len(fs.tenants)] = p.Close() }()
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("close %d: %v", i, err)
		}
	}
	require.ErrorIs(t, p.Reset(ctx), ErrClosed)
	live := drv.Live()
	require.Zero(t, live.GreenCtxs)
	require.Zero(t, live.Streams)
	require.Zero(t, live.Modules)
}
