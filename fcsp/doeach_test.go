package fcsp

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// DoEach visits every green context Do may hold, once each, making the
// ones not made yet; an unpartitioned tenant's once.
func TestDoEachVisitsEveryContext(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("t", WithSMs(16), WithConcurrentDos(4))
	require.NoError(t, err)
	var mu sync.Mutex
	seen := map[cuda.Context]int{}
	require.NoError(t, tn.DoEach(context.Background(), func(cur Current) error {
		mu.Lock()
		seen[cur.in.Cur]++
		mu.Unlock()
		return nil
	}))
	require.Len(t, seen, 4)
	for c, n := range seen {
		require.Equal(t, 1, n, "context %#x visited %d times", c, n)
	}
	require.Equal(t, 4, tn.c.partition().Slots())

	// An unpartitioned tenant beside a partition runs in the commons'
	// green contexts: DoEach warms as many as one class uses by default.
	plain, err := p.NewTenant("plain")
	require.NoError(t, err)
	var runs atomic.Int32
	require.NoError(t, plain.DoEach(context.Background(), func(Current) error { runs.Add(1); return nil }))
	require.EqualValues(t, smpart.DefaultSlots, runs.Load())

	// On the whole device (no partition) the one primary context serves.
	q, _ := openSim(t)
	whole, err := q.NewTenant("whole")
	require.NoError(t, err)
	runs.Store(0)
	require.NoError(t, whole.DoEach(context.Background(), func(Current) error { runs.Add(1); return nil }))
	require.EqualValues(t, 1, runs.Load())
}

// Bad calls: nil f, from inside a Do, and a ctx that ends while another Do
// holds a context DoEach needs.
func TestDoEachRefusesAndEnds(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("t", WithSMs(16), WithConcurrentDos(2))
	require.NoError(t, err)
	ctx := context.Background()
	require.ErrorIs(t, tn.DoEach(ctx, nil), ErrInvalidArgument)
	require.ErrorIs(t, tn.Do(ctx, func(Current) error {
		return tn.DoEach(ctx, func(Current) error { return nil })
	}), ErrInsideDo)

	release := make(chan struct{})
	holding := make(chan struct{})
	go func() {
		_ = tn.Do(ctx, func(Current) error { close(holding); <-release; return nil })
	}()
	<-holding
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = tn.DoEach(short, func(Current) error { return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)
	close(release)
	require.NoError(t, tn.DoEach(ctx, func(Current) error { return nil }), "every context free again")
}
