package fcsp

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/inside"
)

// More Dos in flight on an unpartitioned tenant than inside.Threads has slots:
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

	const n = inside.Slots + 8
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
				if err := b.c.checkNotInsideDo(); err != nil {
					t.Errorf("another tenant's Close from inside Do: %v", err)
				}
				return nil
			})
		}()
	}
	entered.Wait()
	require.EqualValues(t, n-inside.Slots, a.c.dos.Over(), "the Dos past the slots are counted in the map")
	notInside := make(chan bool)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		notInside <- !a.c.dos.Here()
	}()
	require.True(t, <-notInside, "a thread inside no Do")
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.True(t, a.c.dos.Idle(), "a thread still counted inside")
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
			require.True(t, a.c.dos.Here())
			return nil
		}))
		require.False(t, a.c.dos.Here())
		require.NoError(t, a.Close())
	}
}
