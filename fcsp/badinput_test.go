package fcsp

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 28 #16: bad input is a typed error that says what was wrong, never
// a panic or an OS error; after Close, calls say ErrClosed.
func TestBadInputIsTyped(t *testing.T) {
	_, err := openSimErr(0, Option{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "option 1 is the zero value") // openSimErr puts the simulator first

	dir := t.TempDir()
	_, err = openSimErr(0, WithSharedRegion(dir))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "is a directory")
	_, err = openSimErr(0, WithSharedRegion(filepath.Join(dir, "no-such-folder", "region")))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "does not exist")
	bad := filepath.Join(dir, "corrupt")
	require.NoError(t, os.WriteFile(bad, make([]byte, 1<<16), 0o600))
	_, err = openSimErr(0, WithSharedRegion(bad))
	require.ErrorIs(t, err, ErrBadRegion)

	p, _ := openSim(t)
	_, err = p.NewTenant("a", WithSMs(8), TenantOption{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "option 1 is the zero value")
	a, err := p.NewTenant("a", WithSMs(8))
	require.NoError(t, err)
	require.ErrorIs(t, a.Scope(context.Background(), nil), ErrInvalidArgument)
	require.ErrorIs(t, a.Shutdown(nil), ErrInvalidArgument) //nolint:staticcheck // a nil ctx is the point
	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Scope(context.Background(), func(*Scope) error { return nil }), ErrClosed)
	require.ErrorIs(t, a.Trim(), ErrClosed)
	require.NoError(t, p.Close())
	_, _, err = p.SplitTable(8)
	require.ErrorIs(t, err, ErrClosed)
}
