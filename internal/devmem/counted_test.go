package devmem

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Alloc and Free for an uncounted caller count themselves in the life lock
// for their call only; Alloc refuses 0 bytes before it enters, Free names a
// pointer the tenant does not hold in the tenant's words, and a closed
// tenant's Enter refuses both, changing nothing.
func TestCounted(t *testing.T) {
	for _, pool := range []*PoolConfig{nil, pooledWith(8 << 20)} {
		d := newDevice(t, 0, 0)
		tn := d.newTenant("a", 8<<20, pool, false)
		s := tn.first()
		_, err := Alloc(tn.mem, s, 0)
		require.ErrorIs(t, err, errs.ErrInvalidArgument)
		require.ErrorContains(t, err, "0 bytes; ask for at least 1")
		p, err := Alloc(tn.mem, s, 1<<20)
		require.NoError(t, err)
		require.Zero(t, tn.in.Load(), "counted out")
		require.EqualValues(t, 1<<20, tn.acct.Used())
		err = Free(tn.mem, s, p+1)
		require.ErrorIs(t, err, memtrack.ErrUnknownPointer)
		require.ErrorContains(t, err, "is not a live allocation of this tenant")
		require.NoError(t, Free(tn.mem, s, p))
		require.Zero(t, tn.in.Load())
		require.Zero(t, tn.acct.Used())
		tn.closed.Store(true)
		_, err = Alloc(tn.mem, s, 1<<20)
		require.ErrorIs(t, err, errs.ErrClosed)
		require.ErrorIs(t, Free(tn.mem, s, p), errs.ErrClosed)
		require.Zero(t, tn.acct.Used())
		require.NoError(t, tn.close())
	}
}
