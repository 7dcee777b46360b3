package fcsp

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// An error of a tenant's call reads `tenant "name": Op: cause`, and the
// cause speaks the user's words: no lower package's prefix (greenctx:,
// tokenbucket:) inside it, no internal noun (memtrack's "account"), and no
// reason that is not the reason.
func TestErrorTextsSpeakTheUsersWords(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("x")
	require.NoError(t, err)
	ctx := context.Background()
	shape := func(t *testing.T, err error, op string, sentinel error, want ...string) {
		t.Helper()
		require.ErrorIs(t, err, sentinel)
		msg := err.Error()
		require.Contains(t, msg, `": `+op+`: `, "the shape tenant \"x\": Op: cause")
		for _, bad := range []string{"greenctx:", "tokenbucket:", "account", "smpart"} {
			require.NotContains(t, msg, bad, "%q", msg)
		}
		for _, w := range want {
			require.Contains(t, msg, w)
		}
	}

	// Free of a pointer the tenant does not hold.
	shape(t, tn.Free(0x1234), "Free", ErrUnknownPointer, "0x1234", "this tenant")

	// A Reshape to a size that is a multiple of the split's groups but
	// not one of the tenant's sizes: no word of granularity.
	rs, err := p.NewTenant("r", WithSMs(16), WithReshapeSizes(16, 32))
	require.NoError(t, err)
	err = rs.Reshape(ctx, 24)
	shape(t, err, "Reshape", ErrGranularity, "24", "16, 32")
	require.NotContains(t, err.Error(), "granularity", "24 is a multiple of the device's groups of 8")

	// NewTenant's refusals.
	_, err = p.NewTenant("z", WithSMs(12))
	shape(t, err, "NewTenant", ErrGranularity, "12", "groups of 8")
	_, err = p.NewTenant("z", WithSMs(1000))
	shape(t, err, "NewTenant", ErrInsufficientSMs, "1000")

	// The launch limiter's answers.
	lim, fn := limitedSpin(t, 0.01, WithTenantRefillPeriod(100*time.Millisecond))
	s := lim.Stream()
	drainTenant(t, s, fn)
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	var a Args
	a.Uint64(0)
	err = s.Launch(dctx, fn, whole, big, 0, &a)
	shape(t, err, "Stream.Launch", context.DeadlineExceeded, "would exceed context deadline")
	r, err := s.Reserve(fn, one, one)
	require.NoError(t, err)
	r.Cancel()
	err = r.Launch(ctx, 0, &a)
	require.Error(t, err)
	shape(t, err, "Reservation.Launch", tokenbucket.ErrReservationUsed, "reservation already used or cancelled")
}
