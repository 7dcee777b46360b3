package fcsp

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// logRecords is a slog handler that keeps the "tenant reclaimed" records.
type logRecords struct {
	mu   sync.Mutex
	recs map[string]slog.Level // tenant -> level
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "tenant reclaimed" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "tenant" {
			h.mu.Lock()
			h.recs[a.Value.String()] = r.Level
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *logRecords) level(tenant string) (slog.Level, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.recs[tenant]
	return l, ok
}

// Pool.Close closing open tenants is documented use: it logs at Info, not
// Warn (before, every open tenant logged a WARN). A tenant that leaked
// allocations into the close, or one whose handle was collected unclosed,
// still warns.
func TestPoolCloseLogsOpenTenantsAtInfo(t *testing.T) {
	h := &logRecords{recs: map[string]slog.Level{}}
	p, err := openSimErr(0, WithLogger(slog.New(h)))
	require.NoError(t, err)
	clean, err := p.NewTenant("clean")
	require.NoError(t, err)
	leaky, err := p.NewTenant("leaky")
	require.NoError(t, err)
	_, err = leaky.Alloc(t.Context(), 1<<20)
	require.NoError(t, err)
	func() {
		lost, err := p.NewTenant("lost")
		require.NoError(t, err)
		_ = lost
	}()
	require.Eventually(t, func() bool {
		runtime.GC()
		_, ok := h.level("lost")
		return ok
	}, 5*time.Second, time.Millisecond, "the collected tenant was never reclaimed")
	require.NoError(t, p.Close())
	runtime.KeepAlive(clean)
	runtime.KeepAlive(leaky)
	for tenant, want := range map[string]slog.Level{"clean": slog.LevelInfo, "leaky": slog.LevelWarn, "lost": slog.LevelWarn} {
		got, ok := h.level(tenant)
		require.True(t, ok, "tenant %q: no record", tenant)
		require.Equal(t, want, got, "tenant %q", tenant)
	}
}
