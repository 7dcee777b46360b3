package poolmem

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/config"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/hamienv"
	"github.com/fcsp-go/fcsp-go/internal/overhead"
)

// Without a region the tracker is of the smallest limit and nothing is
// shared.
func TestTrackerOfTheLimit(t *testing.T) {
	cfg := config.NewPool()
	require.NoError(t, cfg.SetMemLimit(1<<30))
	tr, shared, err := Tracker(&cfg, hamienv.Config{}, 0, 4<<30, new(overhead.Meter), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Nil(t, shared)
	require.Equal(t, uint64(1<<30), tr.Limit())
}

// A pool that samples nothing (the simulator's default) gets a watch that
// says so, unless a bound or the headroom asks for the figure.
func TestWatchNeedsSamplingForItsOptions(t *testing.T) {
	cfg := config.NewPool()
	cfg.Simulated = true
	w, err := Watch(&cfg, Sampling{})
	require.NoError(t, err)
	require.Contains(t, w.Read().Reason, "not sampled")
	cfg.Headroom = true
	_, err = Watch(&cfg, Sampling{})
	require.ErrorIs(t, err, errs.ErrInvalidArgument)
	cfg.Headroom = false
	require.NoError(t, cfg.SetUnaccounted(1<<20))
	_, err = Watch(&cfg, Sampling{})
	require.ErrorIs(t, err, errs.ErrInvalidArgument)
}
