package greenctx_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
)

// After a sticky fault: Abandon, ResetPrimary, Rebuild gives partitions of
// the same SMs that work; Close of an abandoned partition returns its
// groups; nothing leaks.
func TestAbandonResetRebuild(t *testing.T) {
	drv := fake.New(fake.H200())
	dev, err := greenctx.Open(drv, 0)
	require.NoError(t, err)
	split, err := dev.Split(8)
	require.NoError(t, err)
	a, err := split.Take(16)
	require.NoError(t, err)
	b, err := split.Take(24)
	require.NoError(t, err)
	_, err = a.NewStream(0)
	require.NoError(t, err)

	drv.SetResettableFaults(true) // the in-process path; the H200's reset cannot clear it
	drv.InjectFault(0, cuda.ErrorIllegalAddress)
	_, err = a.NewStream(0)
	require.ErrorIs(t, err, cuda.ErrorIllegalAddress)
	require.ErrorContains(t, a.Rebuild(), "not abandoned")
	require.NoError(t, a.Abandon())
	require.NoError(t, a.Abandon(), "idempotent")
	require.NoError(t, b.Abandon())
	require.ErrorIs(t, a.Do(func(cuda.Context) error { return nil }), greenctx.ErrClosed)
	require.Error(t, a.Rebuild(), "the device is still poisoned")
	require.NoError(t, dev.ResetPrimary())
	require.NoError(t, a.Rebuild())
	require.NoError(t, b.Close(), "an abandoned partition closes without the driver")
	require.Equal(t, 16, a.SMs())
	s, err := a.NewStream(0)
	require.NoError(t, err)
	require.NoError(t, a.DestroyStream(s))
	require.Equal(t, 132-16, split.FreeSMs(), "the split's 12-SM remainder counts as free")
	require.NoError(t, a.Close())
	require.NoError(t, dev.Close())
	live := drv.Live()
	require.Zero(t, live.GreenCtxs)
	require.Zero(t, live.Streams)
	require.Zero(t, live.PrimaryRefs)
}
