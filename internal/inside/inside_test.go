package inside

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
)

// Slots are claimed from the one a thread's id hashes to, and a taken one
// is passed over.
func TestProbe(t *testing.T) {
	var d Threads
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me := osthread.ID()
	other := me + Slots // hashes to the same slot
	s1 := d.Enter(other)
	require.Equal(t, me%Slots, s1)
	require.False(t, d.Here(), "another thread's slot")
	s2 := d.Enter(me)
	require.Equal(t, (me+1)%Slots, s2, "the next slot")
	require.True(t, d.Here())
	require.True(t, d.Live(s2, me))
	d.Exit(s2, me)
	require.False(t, d.Here())
	require.False(t, d.Live(s2, me), "a slot given back")
	d.Exit(s1, other)
	require.True(t, d.Idle())
}

// A call that would wait for the Dos is refused with ErrOwnDo (an
// ErrInsideDo) from inside one, on its own thread only.
func TestNotInside(t *testing.T) {
	var d Threads
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me := osthread.ID()
	require.NoError(t, d.NotInside())
	other := d.Enter(me + 1)
	require.NoError(t, d.NotInside(), "another thread's Do")
	slot := d.Enter(me)
	require.ErrorIs(t, d.NotInside(), ErrOwnDo)
	require.ErrorIs(t, ErrOwnDo, errs.ErrInsideDo)
	d.Exit(slot, me)
	d.Exit(other, me+1)
	require.NoError(t, d.NotInside())
}

// Past the slots, Dos are counted in the map: the calling thread is found
// there too, another thread's entries are not taken for it, and Live
// answers for a map entry by looking; when they have all left, nothing is
// left counted.
func TestPastTheSlots(t *testing.T) {
	var d Threads
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me := osthread.ID()
	others, slots := make([]int, Slots), make([]int, Slots)
	for i := range others {
		others[i] = me + 1 + i
		slots[i] = d.Enter(others[i])
		require.GreaterOrEqual(t, slots[i], 0)
	}
	require.Equal(t, -1, d.Enter(me+1000), "every slot taken: the map")
	require.Equal(t, 1, d.Over())
	require.False(t, d.Here(), "other threads' Dos")
	require.Equal(t, -1, d.Enter(me))
	require.Equal(t, 2, d.Over())
	require.True(t, d.Here())
	require.True(t, d.Live(-1, me))
	require.True(t, d.Pinned())
	d.Exit(-1, me)
	require.False(t, d.Here())
	require.False(t, d.Idle())
	d.Exit(-1, me+1000)
	for i, th := range others {
		d.Exit(slots[i], th)
	}
	require.True(t, d.Idle())
}

// Concurrent Dos on their own threads each find themselves and no other.
func TestConcurrent(t *testing.T) {
	var d Threads
	var wg sync.WaitGroup
	for range 2 * Slots {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for range 100 {
				me := osthread.ID()
				assert.False(t, d.Here())
				s := d.Enter(me)
				assert.True(t, d.Here())
				assert.True(t, d.Live(s, me))
				d.Exit(s, me)
			}
		})
	}
	wg.Wait()
	require.True(t, d.Idle())
	require.Zero(t, d.Over())
}
