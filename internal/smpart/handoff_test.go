package smpart_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// GaveDrained waits only for the work on SMs the last Reshape gave up:
// after a growth the old layout's work runs on SMs the partition still
// holds; after a shrink, until its hand-over events are reached. Drained
// waits for either.
func TestGaveDrainedIsAboutTheSMsGivenUp(t *testing.T) {
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	s, err := d.Split(8)
	require.NoError(t, err)
	p, err := s.TakeLayouts(16, []int{16, 32})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	state := func() (gave, all bool) {
		t.Helper()
		gave, err := p.GaveDrained()
		require.NoError(t, err)
		all, err = p.Drained()
		require.NoError(t, err)
		return gave, all
	}
	gave, all := state()
	require.True(t, gave && all, "never reshaped")
	drv.HoldEvents(true) // the work queued before a Reshape never ends
	defer drv.HoldEvents(false)
	require.NoError(t, p.Reshape(32, nil))
	gave, all = state()
	require.True(t, gave, "grown: nothing given up")
	require.False(t, all, "the old layout's work still runs")
	require.NoError(t, p.Reshape(16, nil))
	gave, all = state()
	require.False(t, gave, "shrunk: the SMs given up still run its work")
	require.False(t, all)
	drv.HoldEvents(false)
	gave, all = state()
	require.True(t, gave && all, "the work has run")
}
