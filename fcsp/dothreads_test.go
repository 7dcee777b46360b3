package fcsp

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/osthread"
)

// More Dos in flight on an unpartitioned tenant than doThreads has slots:
// the last ones count themselves in the map. A Close from inside any of
// them, slot or map, is refused; a Close of another tenant from inside is
// not; a thread inside no Do is not taken for one; and when they have all
// returned nothing is left counted.
func TestDoCloseInsideRefusedPastTheSlots(t *testing.T) {
	p, _ := openSim(t)
	a, err := p.NewTenant("a")
	require.NoError(t, err)
	b, err := p.NewTenant("b")
	require.NoError(t, err)

	const n = doSlots + 8
	var entered sync.WaitGroup
	entered.Add(n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- a.Do(context.Background(), func(Current) error {
				entered.Done()
				<-release
				if err := a.Close(); !errors.Is(err, ErrInsideDo) {
					t.Errorf("Close from inside Do: %v, want ErrInsideDo", err)
				}
				if err := b.c.checkNotInsideDo("Close"); err != nil {
					t.Errorf("another tenant's Close from inside Do: %v", err)
				}
				return nil
			})
		}()
	}
	entered.Wait()
	require.EqualValues(t, n-doSlots, a.c.dos.over.Load(), "the Dos past the slots are counted in the map")
	notInside := make(chan bool)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		notInside <- !a.c.dos.here()
	}()
	require.True(t, <-notInside, "a thread inside no Do")
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for i := range a.c.dos.slots.Load() {
		require.Zero(t, a.c.dos.slots.Load()[i].thread.Load(), "slot %d still names a thread", i)
	}
	require.Zero(t, a.c.dos.over.Load())
	require.Empty(t, a.c.dos.n)
	require.NoError(t, a.Close())
}

// A nested Do claims a slot of its own and gives back only that one: the
// outer Do still refuses Close after the inner returns.
func TestDoNestedKeepsTheOuterCounted(t *testing.T) {
	p, _ := openSim(t)
	for _, opts := range [][]TenantOption{nil, {WithSMs(16)}} {
		a, err := p.NewTenant("a", opts...)
		require.NoError(t, err)
		require.NoError(t, a.Do(context.Background(), func(Current) error {
			require.NoError(t, a.Do(context.Background(), func(Current) error {
				require.ErrorIs(t, a.Close(), ErrInsideDo)
				return nil
			}))
			require.ErrorIs(t, a.Close(), ErrInsideDo, "after the nested Do returned")
			require.True(t, a.c.dos.here())
			return nil
		}))
		require.False(t, a.c.dos.here())
		require.NoError(t, a.Close())
	}
}

// Slots are claimed from the one a thread's id hashes to, and a taken one
// is passed over.
func TestDoThreadsProbe(t *testing.T) {
	var d doThreads
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me := osthread.ID()
	other := me + doSlots // hashes to the same slot
	s1 := d.enter(other)
	require.Equal(t, me%doSlots, s1)
	require.False(t, d.here(), "another thread's slot")
	s2 := d.enter(me)
	require.Equal(t, (me+1)%doSlots, s2, "the next slot")
	require.True(t, d.here())
	d.exit(s2, me)
	require.False(t, d.here())
	d.exit(s1, other)
	for i := range d.slots.Load() {
		require.Zero(t, d.slots.Load()[i].thread.Load())
	}
}
