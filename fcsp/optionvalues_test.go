package fcsp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 58 #9: a shared region's path is checked with its option: a NUL
// byte, a relative path or a name past the OS's limits is
// ErrInvalidArgument before Open makes anything, and no file appears in
// the working directory.
func TestSharedRegionPathCheckedWithTheOption(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, path := range []string{"/tmp/a\x00b", "region", filepath.Join(dir, strings.Repeat("n", 10000))} {
		_, err := openSimErr(0, WithSharedRegion(path))
		require.ErrorIs(t, err, ErrInvalidArgument, "%.40q", path)
		require.ErrorContains(t, err, "shared region path")
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "nothing made in the working directory")
}
