package place_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/internal/unscoped"
	"github.com/fcsp-go/fcsp-go/kernels"
)

func open(t *testing.T) (*fake.Driver, *smpart.Device, *smpart.Partition) {
	t.Helper()
	drv := fake.New(fake.H200())
	fake.RegisterKernels(drv)
	dev, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	s, err := dev.Split(8)
	require.NoError(t, err)
	p, err := s.Take(16)
	require.NoError(t, err)
	return drv, dev, p
}

// The whole device excludes nothing: every Do takes the primary context,
// holding no slot, any number at once; a partition's Do holds one of its
// green contexts, a nested Do on the same thread the same one, and a Do
// on a closed partition is errs.ErrClosed.
func TestTake(t *testing.T) {
	_, dev, part := open(t)
	whole := place.Whole{Dev: dev, N: 132}
	for range 3 {
		tk, err := whole.Take(context.Background())
		require.NoError(t, err)
		require.Nil(t, tk.Slot)
		require.Equal(t, dev.Primary(), tk.Cur)
	}
	require.False(t, whole.Partitioned())
	require.Equal(t, dev.Primary(), whole.AnyThread())
	require.False(t, whole.IsContext(dev.Primary()), "the primary context is every unpartitioned tenant's")

	green := place.Green{Part: part}
	require.True(t, green.Partitioned())
	require.Zero(t, green.AnyThread(), "a green context is current on one thread at a time")
	require.Equal(t, 16, green.SMs())
	tk, err := green.Take(context.Background())
	require.NoError(t, err)
	require.NotNil(t, tk.Slot)
	require.True(t, green.IsContext(tk.Cur))
	require.NotEqual(t, dev.Primary(), tk.Cur)
	tk.Slot.Release()

	require.NoError(t, green.Close())
	_, err = green.Take(context.Background())
	require.ErrorIs(t, err, errs.ErrClosed)
}

// A partition's streams: the first is the partition's own, later ones are
// kept idle when closed, an unused one with no driver call.
func TestGreenStreams(t *testing.T) {
	drv, _, part := open(t)
	green := place.Green{Part: part}
	first, own, err := green.NewStream(true)
	require.NoError(t, err)
	require.True(t, own)
	require.Equal(t, part.Stream(), first)
	h, _, err := green.NewStream(false)
	require.NoError(t, err)
	syncs := drv.Calls("cuStreamSynchronize")
	require.NoError(t, green.DestroyStream(h, true))
	require.Equal(t, syncs, drv.Calls("cuStreamSynchronize"), "an unused stream is kept without a wait")
	again, _, err := green.NewStream(false)
	require.NoError(t, err)
	require.Equal(t, h, again, "the idle stream is handed out again")
	require.NoError(t, green.DestroyStream(again, false))
	require.Greater(t, drv.Calls("cuStreamSynchronize"), syncs, "a used stream is waited for")
}

// The launcher launches with no context on a partition's stream where the
// driver takes that (probed once), and with the primary context where it
// refuses, learning so once; the whole device's launches take the primary
// context from the start.
func TestLauncher(t *testing.T) {
	for _, wants := range []bool{false, true} {
		drv, dev, part := open(t)
		if wants {
			drv.RequireContext()
		}
		mod, err := drv.ModuleLoadData(dev.Primary(), kernels.ChainPTX)
		require.NoError(t, err)
		fn, err := drv.ModuleGetFunction(dev.Primary(), mod, "spin")
		require.NoError(t, err)
		var args cuda.Args
		args.Uint64(0)
		one := cuda.Dim3{X: 1, Y: 1, Z: 1}
		var probe unscoped.Probe
		l := place.Launcher{Drv: drv, Probe: &probe, Dev: dev, Log: slog.New(slog.DiscardHandler)}
		green := place.Green{Part: part}
		for range 3 {
			require.NoError(t, l.Launch(green, fn, one, one, 0, part.Stream(), &args))
		}
		want := unscoped.Yes
		if wants {
			want = unscoped.No
		}
		require.Equal(t, want, probe.State(), "driver wants a context: %v", wants)
		whole := place.Whole{Dev: dev, N: 132}
		s, _, err := whole.NewStream(false)
		require.NoError(t, err)
		require.NoError(t, l.Launch(whole, fn, one, one, 0, s, &args))
		require.Equal(t, 4, drv.Launches())
		require.NoError(t, drv.StreamSynchronize(dev.Primary(), s))
	}
}

// Unscoped hands a failure that is not the driver's refusal of a missing
// context back as it is, learning nothing from it.
func TestUnscopedKeepsOtherErrors(t *testing.T) {
	_, dev, part := open(t)
	var probe unscoped.Probe
	boom := errors.New("boom")
	err := place.Unscoped(&probe, place.Green{Part: part}, dev, slog.New(slog.DiscardHandler), func(cuda.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, unscoped.Unknown, probe.State())
}
