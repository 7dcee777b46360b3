package workload

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/fcsp"
	"github.com/fcsp-go/fcsp-go/fcsptest"
)

func TestJobOnTheSimulator(t *testing.T) {
	ctx := context.Background()
	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
	require.NoError(t, err)
	defer pool.Close()
	tn, err := pool.NewTenant("t", fcsp.WithSMs(8))
	require.NoError(t, err)
	j, err := NewJob(ctx, tn, tn.Stream(), 512, 20, 2)
	require.NoError(t, err)
	tm, err := NewTimer(pool)
	require.NoError(t, err)
	defer tm.Close()
	_, all, err := tm.Measure(ctx, 3, j, nil, j.S, nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, all, 0.0)
	out, err := j.Result()
	require.NoError(t, err)
	require.Len(t, out, 4*512)
	_, err = j.Result()
	require.Error(t, err, "Result poisons the buffer: without a new run the check must fail")
	require.Equal(t, 2.0, Median([]float64{3, 1, 2}))
}
