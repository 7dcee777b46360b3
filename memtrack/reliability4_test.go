package memtrack

import (
	"errors"
	"sync"
	"testing"
)

// Issue 39, item 18: a Release (or StartRelease) racing Close answers
// ErrClosed or frees: never ErrUnknownPointer for a pointer that was live
// until Close took it.
func TestReleaseRacingCloseIsNeverUnknown(t *testing.T) {
	tr, err := New(1 << 40)
	if err != nil {
		t.Fatal(err)
	}
	rounds := 20000
	if raceEnabled {
		rounds = 2000
	}
	const ptr, size = 0x7000_0000, 4096
	for round := range rounds {
		a, err := tr.NewAccount("a", 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		r, err := a.Reserve(size)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Commit(ptr); err != nil {
			t.Fatal(err)
		}
		var relErr error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			if round%2 == 0 {
				_, relErr = a.Release(ptr)
				return
			}
			var pr PendingRelease
			if pr, relErr = a.StartRelease(ptr); relErr == nil {
				pr.Commit()
			}
		})
		wg.Go(func() {
			<-start
			_, _ = a.Close()
		})
		close(start)
		wg.Wait()
		if errors.Is(relErr, ErrUnknownPointer) {
			t.Fatalf("round %d: a release racing Close answered %v for a live pointer; want nil or ErrClosed", round, relErr)
		}
		if relErr != nil && !errors.Is(relErr, ErrClosed) {
			t.Fatalf("round %d: %v", round, relErr)
		}
		if tr.Used() != 0 {
			t.Fatalf("round %d: device total %d, want 0", round, tr.Used())
		}
	}
}
