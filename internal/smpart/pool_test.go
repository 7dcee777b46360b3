package smpart_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

var quiet = slog.New(slog.DiscardHandler)

func TestOpenIndex(t *testing.T) {
	drv := fake.New(fake.H200())
	_, err := smpart.OpenIndex(context.Background(), drv, 1)
	require.ErrorIs(t, err, errs.ErrInvalidArgument)
	require.ErrorContains(t, err, "device index 1; this machine has 1 GPU(s)")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = smpart.OpenIndex(ctx, drv, 0)
	require.ErrorIs(t, err, context.Canceled)
	d, err := smpart.OpenIndex(context.Background(), drv, 0)
	require.NoError(t, err)
	desc, err := d.Describe(0, false, 32, nil)
	require.NoError(t, err)
	require.Equal(t, 32, desc.WorkQueues)
	require.Equal(t, d.SMs(), desc.SMs)
	require.Equal(t, d.Granularity(), desc.Granularity)
	require.NotEmpty(t, desc.Name)
	require.True(t, strings.HasPrefix(desc.UUID, "GPU-"), desc.UUID)
	require.Contains(t, desc.String(), "GPU 0: ")
	require.NotContains(t, desc.String(), "[simulated]")
	desc.Simulated = true
	require.Contains(t, desc.String(), "[simulated]")
	require.NoError(t, d.Close())
}

func TestCut(t *testing.T) {
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer d.Close()
	spare := smpart.NewSpares([]int{16, 8})
	cfg := smpart.CutConfig{Unit: d.SMs() + 1, Spare: spare, Log: quiet}
	_, _, err = smpart.Cut(context.Background(), d, cfg)
	require.ErrorIs(t, err, errs.ErrInvalidArgument, "a unit larger than the device")

	cfg.Unit = d.Granularity() + 1 // the driver rounds it up
	_, _, err = smpart.Cut(context.Background(), d, cfg)
	require.ErrorIs(t, err, smpart.ErrGranularity)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg.Unit, cfg.Prewarm = 0, []int{16, 8}
	_, _, err = smpart.Cut(ctx, d, cfg)
	require.ErrorIs(t, err, context.Canceled, "ctx ended before prewarming")

	split, noSplit, err := smpart.Cut(context.Background(), d, cfg)
	require.NoError(t, err)
	require.NoError(t, noSplit)
	require.Equal(t, d.Granularity(), split.GroupSMs())
	require.Equal(t, 2, spare.Len())
	require.Equal(t, 24, spare.SMs())
	require.NoError(t, spare.Close())
}

// A driver that will not split the SMs (an MPS client, say) leaves a pool
// without partitions where none was asked for by name, and fails it where
// one was.
func TestCutWithoutPartitions(t *testing.T) {
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer d.Close()
	drv.FailNext("cuDevSmResourceSplitByCount", cuda.ErrorInvalidResourceConfig)
	split, noSplit, err := smpart.Cut(context.Background(), d, smpart.CutConfig{Spare: smpart.NewSpares(nil), Log: quiet})
	require.NoError(t, err)
	require.Nil(t, split)
	require.ErrorIs(t, noSplit, cuda.ErrNotAvailable)
	require.ErrorIs(t, noSplit, cuda.ErrorInvalidResourceConfig)

	drv.FailNext("cuDevSmResourceSplitByCount", cuda.ErrorInvalidResourceConfig)
	_, _, err = smpart.Cut(context.Background(), d, smpart.CutConfig{Prewarm: []int{8}, Spare: smpart.NewSpares(nil), Log: quiet})
	require.ErrorIs(t, err, cuda.ErrorInvalidResourceConfig)
	require.NotErrorIs(t, err, cuda.ErrNotAvailable)
}

func TestTakeFor(t *testing.T) {
	_, _, split := fakeSplit(t, 8)
	spare := smpart.NewSpares([]int{16})
	kept, err := split.Take(16)
	require.NoError(t, err)
	spare.Add(kept)
	takeFor := func(a smpart.Ask) (*smpart.Partition, error) { return split.TakeFor(spare.Claim(a), a) }

	p, err := takeFor(smpart.Ask{SMs: 16})
	require.NoError(t, err)
	require.Same(t, kept, p, "a spare of the size is taken first")
	q, err := takeFor(smpart.Ask{SMs: 16})
	require.NoError(t, err)
	require.NotSame(t, kept, q)

	_, err = takeFor(smpart.Ask{Sizes: []int{8, 16}})
	require.ErrorIs(t, err, errs.ErrInvalidArgument, "layouts without a size to start at")
	r, err := takeFor(smpart.Ask{SMs: 8, Sizes: []int{8, 16}})
	require.NoError(t, err)
	require.True(t, r.Reshapable())
	require.Equal(t, 8, r.SMs())

	rem, err := takeFor(smpart.Ask{Remainder: true})
	if split.Remainder() > 0 {
		require.NoError(t, err)
		require.NoError(t, rem.Close())
	}
	rest, err := takeFor(smpart.Ask{Rest: true})
	require.NoError(t, err)
	require.Zero(t, split.FreeSMs(), "the rest is every SM free")
	for _, x := range []*smpart.Partition{p, q, r, rest} {
		require.NoError(t, x.Close())
	}
}

func TestCheckWorkQueues(t *testing.T) {
	require.NoError(t, smpart.CheckWorkQueues(2))
	require.NoError(t, smpart.CheckWorkQueues(32))
	err := smpart.CheckWorkQueues(1)
	require.ErrorIs(t, err, errs.ErrFewWorkQueues)
	require.ErrorContains(t, err, "fcsp: too few hardware work queues for SM partitions: CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream of this process on one hardware work queue")
}

// A pool that could not split its device keeps a nil Split, which has no
// groups and no free SMs.
func TestNilSplit(t *testing.T) {
	var s *smpart.Split
	require.Zero(t, s.GroupSMs())
	require.Zero(t, s.FreeSMs())
}

// TableOf gives Table's rows as another type of Row's shape, nil where
// Table gives nil.
func TestTableOf(t *testing.T) {
	type row struct{ MinCount, Groups, GroupSMs, Remainder int }
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer d.Close()
	pr, me, err := d.Table(8, 16)
	require.NoError(t, err)
	prOf, meOf, err := smpart.TableOf[row](d, 8, 16)
	require.NoError(t, err)
	require.Len(t, prOf, len(pr))
	for i := range pr {
		require.Equal(t, row(pr[i]), prOf[i])
		require.Equal(t, row(me[i]), meOf[i])
	}
	prOf, meOf, err = smpart.TableOf[row](d)
	require.NoError(t, err)
	require.Nil(t, prOf)
	require.Nil(t, meOf)
}
