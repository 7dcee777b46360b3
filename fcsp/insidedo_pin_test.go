package fcsp

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/inside"
)

// Issue 28 #5: the check that refuses Close from inside a Do must pin its
// goroutine while it looks. Unpinned, the goroutine could read its thread's
// id, leave that thread, and find a Do that then started there: a Close
// from outside every Do was refused with ErrInsideDo. Here, on one P, the
// checking goroutine parks between the look and the scan while a Do
// starts: unpinned, the Do takes the thread it left (and the check sees
// it); pinned, the Do must take another.
func TestInsideDoCheckPinsItsThread(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p, _ := openSim(t)
	tn, err := p.NewTenant("t")
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	inside.TestHookHere = func() {
		inside.TestHookHere = nil
		go func() {
			done <- tn.Do(context.Background(), func(Current) error { close(entered); <-release; return nil })
		}()
		<-entered
	}
	defer func() { inside.TestHookHere = nil }()
	err = tn.c.checkNotInsideDo()
	close(release)
	require.NoError(t, <-done)
	require.NoError(t, err, "a goroutine outside every Do was taken for one inside")
	require.NoError(t, tn.Close())
}
