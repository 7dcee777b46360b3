package smpart_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// A released primary-context stream is handed out again without a driver
// call, at most eight are kept, and Close destroys them.
func TestPrimaryStreamsAreReused(t *testing.T) {
	drv := fake.New(fake.H200())
	d, err := smpart.Open(drv, 0)
	require.NoError(t, err)
	s, err := d.NewStream()
	require.NoError(t, err)
	require.NoError(t, d.ReleaseStream(s))
	made := drv.Calls("cuStreamCreate")
	again, err := d.NewStream()
	require.NoError(t, err)
	require.Equal(t, s, again)
	require.Equal(t, made, drv.Calls("cuStreamCreate"), "a kept stream came from the driver")
	var ss []cuda.Stream
	for range 12 {
		s, err := d.NewStream()
		require.NoError(t, err)
		ss = append(ss, s)
	}
	require.NoError(t, d.ReleaseStream(again))
	for _, s := range ss {
		require.NoError(t, d.ReleaseStream(s))
	}
	require.Equal(t, 8, drv.Live().Streams, "kept beyond eight")
	require.NoError(t, d.Close())
	require.Zero(t, drv.Live().Streams)
	_, err = d.NewStream()
	require.ErrorIs(t, err, smpart.ErrClosed)
}
