package fcsp

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/memtrack"
	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// One identity per meaning: whichever layer saw the close (or the bad
// input) first, the caller matches the public sentinel.
func TestOneErrClosedOneErrInvalidArgument(t *testing.T) {
	for _, e := range []error{smpart.ErrClosed, memtrack.ErrClosed, tokenbucket.ErrClosed} {
		require.ErrorIs(t, e, ErrClosed)
	}
	for _, e := range []error{tokenbucket.ErrInvalidConfig, tokenbucket.ErrInvalidAmount, memtrack.ErrInvalidSize, memtrack.ErrInvalidLimit} {
		require.ErrorIs(t, e, ErrInvalidArgument)
		require.NotErrorIs(t, e, ErrClosed)
	}
	require.NotErrorIs(t, memtrack.ErrInvalidSize, memtrack.ErrInvalidLimit, "finer meanings stay distinct")
}

// A launch that passed the tenant's closed check while its stream's bucket
// was being closed reports fcsp.ErrClosed, not the bucket's own error.
func TestLaunchRacingCloseIsErrClosed(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("a", WithSMs(8), WithSMLimit(0.5))
	require.NoError(t, err)
	fn := spinKernel(t, tn)
	var a Args
	a.Uint64(0)
	one := Dim3{X: 1, Y: 1, Z: 1}
	s := tn.Stream()
	require.True(t, tn.c.adm.Limited())
	require.NoError(t, s.c.Gate().Close(0)) // the close got as far as the bucket
	err = s.Launch(context.Background(), fn, one, one, 0, &a)
	require.ErrorIs(t, err, ErrClosed)

	// And the tenant's own limit: out of range is ErrInvalidArgument.
	err = tn.SetSMLimit(2)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.True(t, errors.Is(err, tokenbucket.ErrInvalidConfig))
}
