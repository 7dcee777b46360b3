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
	require.False(t, place.Partitioned(whole))
	require.Equal(t, dev.Primary(), whole.AnyThread())
	require.False(t, place.IsContext(whole, dev.Primary()), "the primary context is every unpartitioned tenant's")

	green := place.NewGreen(part)
	require.True(t, place.Partitioned(green))
	require.Zero(t, green.AnyThread(), "a green context is current on one thread at a time")
	require.Equal(t, 16, green.SMs())
	tk, err := green.Take(context.Background())
	require.NoError(t, err)
	require.NotNil(t, tk.Slot)
	require.True(t, place.IsContext(green, tk.Cur))
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
	green := place.NewGreen(part)
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
		green := place.NewGreen(part)
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
	err := place.Unscoped(&probe, place.NewGreen(part), dev, slog.New(slog.DiscardHandler), func(cuda.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, unscoped.Unknown, probe.State())
}

// The whole device has the core alone: it answers no option, and the
// package's functions answer for it as the whole device does. A
// partition has every option; the commons has slots, but its SMs and
// contexts are no tenant's own and the pool, not a tenant, moves it.
func TestCapabilities(t *testing.T) {
	_, dev, part := open(t)
	whole := place.Whole{Dev: dev, N: 132}
	var pl place.Placement = whole
	_, slotted := pl.(place.Slotted)
	_, owned := pl.(place.Owned)
	_, reshaper := pl.(place.Reshaper)
	require.Equal(t, []bool{false, false, false}, []bool{slotted, owned, reshaper}, "the whole device: the core alone")
	require.Equal(t, 1, place.Dos(whole))
	require.Zero(t, place.Layout(whole))
	require.Equal(t, smpart.WaitStats{}, place.Waits(whole))
	require.False(t, place.Reshapable(whole))
	require.Equal(t, []int{132}, place.Sizes(whole))
	require.Error(t, place.Reshape(whole, 8, nil))
	spare, err := place.Retire(whole, true)
	require.NoError(t, err)
	require.Nil(t, spare)
	require.NoError(t, place.Close(whole))
	var ran cuda.Context
	require.NoError(t, place.DoGreen(whole, func(ctx cuda.Context) error { ran = ctx; return nil }))
	require.Equal(t, dev.Primary(), ran, "the primary context serves")

	pl = place.NewGreen(part)
	_, slotted = pl.(place.Slotted)
	_, owned = pl.(place.Owned)
	_, reshaper = pl.(place.Reshaper)
	require.Equal(t, []bool{true, true, true}, []bool{slotted, owned, reshaper}, "a partition: every option")
	require.False(t, place.Reshapable(pl), "made without sizes to switch among")
	require.Equal(t, []int{16}, place.Sizes(pl))
	require.Equal(t, part.Limit(), place.Dos(pl))

	commons, err := dev.NewCommons()
	require.NoError(t, err)
	defer func() { require.NoError(t, commons.Close()) }()
	pl = place.NewCommons(commons)
	_, slotted = pl.(place.Slotted)
	_, owned = pl.(place.Owned)
	_, reshaper = pl.(place.Reshaper)
	require.Equal(t, []bool{true, false, false}, []bool{slotted, owned, reshaper}, "the commons: slots alone")
	require.False(t, place.Partitioned(pl))
	require.False(t, place.IsContext(pl, commons.Context()), "every unpartitioned tenant's")
	require.NoError(t, place.Close(pl), "its pool closes it")
	require.Equal(t, []int{commons.SMs()}, place.Sizes(pl))
}
