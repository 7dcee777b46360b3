package smpart

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The wait quantiles are polled (Stats, a scrape): after the first, a
// read makes no garbage and no sort while no wait is added, and new waits
// show within sortMaxAge.
func TestWaitStatsArePolledCheaply(t *testing.T) {
	var w waitLog
	for i := range 100 {
		w.record(time.Duration(i+1) * time.Microsecond)
	}
	require.Equal(t, 51*time.Microsecond, w.stats(100).P50, "1..100 µs, every call waited")
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = w.stats(100) }))
	for range 200 {
		w.record(time.Second)
	}
	time.Sleep(2 * sortMaxAge)
	s := w.stats(300)
	require.Equal(t, time.Second, s.Max)
	require.Equal(t, time.Second, s.P50, "the new waits are in the quantiles after sortMaxAge")
}
