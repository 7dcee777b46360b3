package fcsp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Stats.ContextWait carries a histogram of the waits (Total and Le, by
// WaitBounds) beside the window's quantiles: a call that waited about 20 ms
// for the one context counts in the buckets from 25 ms up, every other call
// in all of them.
func TestContextWaitHistogram(t *testing.T) {
	require.Equal(t, smpart.WaitBounds, WaitBounds)
	p, _ := openSim(t)
	tn, err := p.NewTenant("part", WithSMs(16), WithConcurrentDos(1))
	require.NoError(t, err)
	ctx := context.Background()
	for range 5 {
		require.NoError(t, tn.Do(ctx, func(Current) error { return nil }))
	}
	held, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = tn.Do(ctx, func(Current) error { close(held); <-release; return nil }) })
	<-held
	wg.Go(func() { _ = tn.Do(ctx, func(Current) error { return nil }) })
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	w := tn.Stats().ContextWait
	require.EqualValues(t, 7, w.Calls)
	require.EqualValues(t, 1, w.Waited)
	require.GreaterOrEqual(t, w.Total, 15*time.Millisecond)
	require.Equal(t, w.Total, w.Max, "one wait")
	for i, b := range WaitBounds {
		want := w.Calls - 1
		if b >= w.Max {
			want = w.Calls
		}
		require.Equal(t, want, w.Le[i], "le %v", b)
	}
	// An unpartitioned tenant's context never excludes: no waits at all.
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	require.Zero(t, plain.Stats().ContextWait)
}
