package memwatch

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// The difference is the device's figure less the pool's, logged once as
// it passes the bound (again only after it fell back below), and charged
// against the device limit as it moves, down as well as up.
func TestWatchChargesAndWarns(t *testing.T) {
	var used, counted atomic.Uint64
	var logs bytes.Buffer
	tr, err := memtrack.New(1 << 30)
	require.NoError(t, err)
	done := make(chan struct{})
	defer close(done)
	w := Start(Config{Every: time.Hour, Done: done,
		Source:  func() (uint64, error) { return used.Load(), nil },
		Counted: counted.Load, Warn: 100 << 20, Charge: tr,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	require.Eventually(t, func() bool { return !w.Read().At.IsZero() }, 5*time.Second, time.Millisecond, "the first sample is taken at Start")

	used.Store(600 << 20)
	counted.Store(400 << 20)
	s := w.Sample()
	require.Equal(t, Sample{At: s.At, Used: 600 << 20, Counted: 400 << 20, Unaccounted: 200 << 20, Charged: 200 << 20}, s)
	require.Equal(t, uint64(200<<20), tr.Used(), "the difference counts against the limit")
	require.Equal(t, s, w.Read())
	require.Equal(t, 1, strings.Count(logs.String(), "passed its bound"), logs.String())
	require.Contains(t, logs.String(), "unaccounted=\"200 MiB\"")

	used.Store(650 << 20)
	w.Sample()
	require.Equal(t, 1, strings.Count(logs.String(), "passed its bound"), "once while it stays over")
	require.Equal(t, uint64(250<<20), tr.Used())

	counted.Store(700 << 20) // the pool counts more than the device shows
	s = w.Sample()
	require.Zero(t, s.Unaccounted)
	require.Zero(t, tr.Used(), "the charge came down")
	used.Store(900 << 20)
	w.Sample()
	require.Equal(t, 2, strings.Count(logs.String(), "passed its bound"), "again after it fell below")

	_, err = tr.Close()
	require.NoError(t, err)
	used.Store(1000 << 20)
	require.Equal(t, uint64(200<<20), w.Sample().Charged, "a closed tracker is charged no more")
}

// A failed reading keeps the last figures and says why.
func TestWatchKeepsTheLastFigures(t *testing.T) {
	fail := errors.New("nvml: gone")
	var err atomic.Pointer[error]
	done := make(chan struct{})
	defer close(done)
	w := Start(Config{Every: time.Hour, Done: done, Counted: func() uint64 { return 1 },
		Source: func() (uint64, error) {
			if e := err.Load(); e != nil {
				return 0, *e
			}
			return 10, nil
		}})
	good := w.Sample()
	err.Store(&fail)
	s := w.Sample()
	require.Equal(t, good.At, s.At)
	require.Equal(t, uint64(9), s.Unaccounted)
	require.Equal(t, "nvml: gone", s.Reason)
	require.Equal(t, "not sampled", (*Watch)(nil).Read().Reason)
	require.Equal(t, "simulated device", Off("simulated device").Read().Reason)
}

// The goroutine samples at its period and stops with Done, running Close.
func TestWatchStopsWithDone(t *testing.T) {
	var n atomic.Int32
	closed := make(chan struct{})
	done := make(chan struct{})
	Start(Config{Every: time.Millisecond, Done: done, Counted: func() uint64 { return 0 },
		Source: func() (uint64, error) { n.Add(1); return 0, nil }, Close: func() { close(closed) }})
	require.Eventually(t, func() bool { return n.Load() >= 3 }, 5*time.Second, time.Millisecond)
	close(done)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not stop with Done")
	}
}

// The fake driver, under any wrappers that Unwrap, is its own source; a
// simulated device without one has none.
func TestSourceForTheFake(t *testing.T) {
	f := fake.New(fake.H200())
	_, err := f.PrimaryCtxRetain(0)
	require.NoError(t, err)
	src, closeSrc, err := SourceFor(cuda.NewGuard(f, nopWatch{}), "GPU-x", true)
	require.NoError(t, err)
	require.Nil(t, closeSrc)
	_, err = f.MemAlloc(0, 5<<20)
	require.Error(t, err) // no context: the fake refuses; allocate in the primary one
	ctx, err := f.PrimaryCtxRetain(0)
	require.NoError(t, err)
	_, err = f.MemAlloc(ctx, 5<<20)
	require.NoError(t, err)
	n, err := src()
	require.NoError(t, err)
	require.Equal(t, f.ProcessMemory(), n)
	require.Equal(t, uint64(5<<20), n)
	_, _, err = SourceFor(noFigure{f}, "GPU-x", true)
	require.EqualError(t, err, "simulated device")
}

// A source opened on the sampling goroutine (NVML's init may take long):
// its failure is the figures' reason, logged once, and nothing samples.
func TestWatchOpensItsSourceOnItsGoroutine(t *testing.T) {
	var logs bytes.Buffer
	done := make(chan struct{})
	defer close(done)
	w := Start(Config{Every: time.Millisecond, Done: done, Counted: func() uint64 { return 0 }, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Open: func() (Source, func(), error) { return nil, nil, errors.New("nvml init: ERROR_LIBRARY_NOT_FOUND") }})
	require.Eventually(t, func() bool { return w.Read().Reason == "nvml init: ERROR_LIBRARY_NOT_FOUND" }, 5*time.Second, time.Millisecond)
	require.True(t, w.Sample().At.IsZero())
	closed := make(chan struct{})
	w = Start(Config{Every: time.Hour, Done: done, Counted: func() uint64 { return 1 },
		Open: func() (Source, func(), error) {
			return func() (uint64, error) { return 5, nil }, func() { close(closed) }, nil
		}})
	require.Eventually(t, func() bool { return w.Read().Used == 5 }, 5*time.Second, time.Millisecond)
	require.Equal(t, uint64(4), w.Sample().Unaccounted)
}

type nopWatch struct{}

func (nopWatch) Refuse(string) error                                          { return nil }
func (nopWatch) See(_ string, _ cuda.Context, _ cuda.Stream, err error) error { return err }

// noFigure hides the fake's figure (and does not Unwrap).
type noFigure struct{ cuda.Driver }
