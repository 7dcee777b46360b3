package shm

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Issue 28, item 1: reads racing Close (a metrics scrape racing a pool's
// Close) used to touch the unmapped region (SIGSEGV) and, after Close, index
// a nil slice (panic). Close now waits for the calls inside the mapping and
// later calls see the closed region: zeros from reads, ErrClosed from
// writes.
func TestReadsRacingClose(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	dir := t.TempDir()
	for round := range rounds {
		r, err := Open(filepath.Join(dir, "region"), testLayout, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := r.Join(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		u := s.Usage(0)
		if err := u.Add(1 << 20); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					r.DeviceUsed(0)
					r.Slots()
					u.Load()
					if err := u.Add(1); err == nil {
						_ = u.Sub(1)
					} else if !errors.Is(err, ErrClosed) {
						t.Errorf("round %d: Add racing Close = %v, want nil or ErrClosed", round, err)
						return
					}
					s.Owned()
				}
			})
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		if got := r.DeviceUsed(0); got != 0 {
			t.Fatalf("DeviceUsed after Close = %d, want 0", got)
		}
		if r.Slots() != nil || u.Load() != 0 || s.Owned() || s.Beat() || s.Leave() || len(r.Reap(0)) != 0 {
			t.Fatal("a closed region still reports a membership")
		}
		if err := u.Add(1); !errors.Is(err, ErrClosed) {
			t.Fatalf("Add after Close = %v, want ErrClosed", err)
		}
		if _, err := r.Join(os.Getpid()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Join after Close = %v, want ErrClosed", err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		os.Remove(filepath.Join(dir, "region"))
	}
}
