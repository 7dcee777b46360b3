package devmem

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Issue 39, item 3: the device limit counts what the pools map, not what
// is allocated from them. Sixteen pooled tenants under a 256 MiB limit ask
// for 1 MiB at a time until each is refused: the fake driver (which maps a
// pool's memory in 32 MiB chunks, as the H200 does) never holds more than
// the limit, and the tracker counts exactly what it holds.
func TestPoolChunksCountAgainstTheDeviceLimit(t *testing.T) {
	const limit = 256 << 20
	d := newDevice(t, 0, limit)
	var tenants []*tenant
	for i := range 16 {
		tenants = append(tenants, d.newTenant(fmt.Sprint("t", i), limit, &PoolConfig{Quota: limit}, false))
	}
	var over, miscounted []string
	allocated := 0
	refused := make([]bool, len(tenants))
	for progress := true; progress; {
		progress = false
		for i, tn := range tenants {
			if refused[i] {
				continue
			}
			_, err := tn.mem.Alloc(tn.first(), 1<<20)
			if err != nil {
				var qe *memtrack.QuotaError
				require.ErrorAs(t, err, &qe, "tenant %d", i)
				require.Equal(t, memtrack.ScopeDevice, qe.Scope)
				refused[i] = true
				continue
			}
			allocated++
			progress = true
			if held := d.drv.Live().Bytes; held > limit && len(over) < 3 {
				over = append(over, fmt.Sprintf("%d MiB held after %d MiB allocated", held>>20, allocated))
			}
			if held, used := d.drv.Live().Bytes, d.tracker.Used(); held != used && len(miscounted) < 3 {
				miscounted = append(miscounted, fmt.Sprintf("the driver holds %d MiB, the tracker counts %d MiB", held>>20, used>>20))
			}
		}
	}
	t.Logf("%d MiB allocated; the driver holds %d MiB; the tracker counts %d MiB", allocated, d.drv.Live().Bytes>>20, d.tracker.Used()>>20)
	require.Empty(t, over, "the pools' chunks passed the %d MiB limit", limit>>20)
	require.Empty(t, miscounted)
	require.Equal(t, limit>>20, allocated, "the limit is filled: every chunk mapped is filled before it is refused")
	for _, tn := range tenants {
		require.NoError(t, tn.close())
	}
	require.Zero(t, d.tracker.Used())
	require.Zero(t, d.drv.Live().Bytes)
}

// Issue 39, item 5: a request at the device limit is not refused by
// blocks a neighbour freed while the trim that made room for it ran: the
// trims and retries go on while memory comes back.
func TestBlocksFreedDuringTheTrimDoNotRefuse(t *testing.T) {
	const limit = 64 << 20
	d := newDevice(t, 0, limit)
	churn := d.newTenant("churn", limit, &PoolConfig{Quota: limit}, false)
	big := d.newTenant("big", limit, nil, false)
	s := churn.first()
	_, err := churn.mem.Alloc(s, 24<<20) // [0, 24 MiB): the first chunk
	require.NoError(t, err)
	second, err := churn.mem.Alloc(s, 24<<20) // [24, 48 MiB): both chunks
	require.NoError(t, err)
	churn.onRelease = func() { // the churning tenant frees while it is trimmed
		churn.onRelease = nil
		require.NoError(t, churn.mem.Free(s, second))
	}
	p, err := big.mem.Alloc(big.first(), 20<<20) // 24 MiB live + 20: fits
	require.NoError(t, err, "24 MiB live and 20 asked for, of %d MiB", limit>>20)
	require.NoError(t, big.mem.Free(big.first(), p))
	require.NoError(t, churn.close())
	require.NoError(t, big.close())
}

// Issue 39, item 6: the trim a neighbour's allocation at the device limit
// makes synchronises neither a capturing stream (its capture would end)
// nor one whose work runs (the allocation would wait for it); it
// synchronises the streams on which it freed blocks once their work is
// done, at once, which the driver needs to give their chunks back.
func TestPeersTrimWaitForNoStream(t *testing.T) {
	const limit = 64 << 20
	d := newDevice(t, 0, limit)
	a := d.newTenant("a", 32<<20, pooledWith(32<<20), false)
	b := d.newTenant("b", 48<<20, nil, false)
	s2 := a.newStream()
	p, err := a.mem.Alloc(s2, 28<<20)
	require.NoError(t, err)
	require.NoError(t, a.mem.Free(s2, p)) // cached on s2's list
	a.first().capturing.Store(true)
	s2.busy.Store(true)
	_, err = b.mem.Alloc(b.first(), 40<<20)
	require.ErrorIs(t, err, memtrack.ErrQuotaExceeded, "a's chunk is held by a free its busy stream has not run")
	require.Equal(t, []int64{0, 0}, []int64{a.first().syncs.Load(), s2.syncs.Load()}, "streams synchronised for a neighbour")
	s2.busy.Store(false)
	q, err := b.mem.Alloc(b.first(), 40<<20)
	require.NoError(t, err, "a's cache makes room")
	require.Equal(t, []int64{0, 1}, []int64{a.first().syncs.Load(), s2.syncs.Load()}, "only the stream that freed blocks, done with its work")
	require.NoError(t, b.mem.Free(b.first(), q))
	a.first().capturing.Store(false)
	require.NoError(t, a.close())
	require.NoError(t, b.close())
}

// Issue 39, item 7: Trim enters its tenant's life lock once. A Reshape's
// pause that begins during the trim waits for that entry; a second entry
// would wait at the pause's gate, and neither would end.
func TestTrimEntersTheLifeLockOnce(t *testing.T) {
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", 64<<20, pooledWith(64<<20), false)
	streams := []*stream{tn.first(), tn.newStream(), tn.newStream()}
	for _, s := range streams {
		p, err := tn.mem.Alloc(s, 1<<20)
		require.NoError(t, err)
		require.NoError(t, tn.mem.Free(s, p))
		s.onSync = func() { tn.paused.Store(true) } // a Reshape pauses the tenant now
	}
	require.NoError(t, tn.mem.Trim())
	require.Zero(t, tn.nested.Load(), "Trim entered the life lock again while a pause waited for it")
	tn.paused.Store(false)
	require.NoError(t, tn.close())
}

// Issue 39, item 19: a pool full at its maximum size is the tenant's
// quota even when the tenant's Close has begun while the allocation ran
// (the caller is counted in the life lock; the engine must not enter it
// again, which a Close refuses, to say so).
func TestFullPoolIsTheQuotaWhileClosing(t *testing.T) {
	d := newDevice(t, 0, 0)
	tn := d.newTenant("a", 64<<20, pooledWith(64<<20), false)
	s := tn.first()
	var blocks []cuda.DevicePtr
	for range 21 {
		p, err := tn.mem.Alloc(s, 3<<20)
		require.NoError(t, err)
		blocks = append(blocks, p)
	}
	for i := 0; i < len(blocks); i += 2 {
		require.NoError(t, tn.mem.Free(s, blocks[i]))
	}
	tn.closed.Store(true) // Close began: new entries are refused
	_, err := tn.mem.Alloc(s, 6<<20)
	require.ErrorIs(t, err, memtrack.ErrQuotaExceeded)
	tn.closed.Store(false)
	require.NoError(t, tn.close())
	require.Zero(t, d.drv.Live().Bytes)
}
