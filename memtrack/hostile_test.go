package memtrack

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/shm"
)

// Issue 28, item 1: a scrape (Used) racing the owner's Close of the tracker
// and of its shared region crashed the process (SIGSEGV in the region, an
// index out of range after it). Reads during and after Close must not
// crash; after Close they report the closed state.
func TestUsedRacingClose(t *testing.T) {
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	dir := t.TempDir()
	for range rounds {
		path := filepath.Join(dir, "region")
		r, err := shm.Open(path, regionLayout, nil)
		if err != nil {
			t.Fatal(err)
		}
		slot, err := r.Join(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		tr, err := New(1<<30, WithShared(mustShare(t, slot, 0)))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := tr.NewAccount("a", 1<<30)
		if err := a.reserve(1 << 20); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					tr.Used()
					tr.Accounts()
					tr.Reaped()
				}
			})
		}
		if _, err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		stop.Store(true)
		wg.Wait()
		if tr.Used() != 0 || tr.Accounts() != 0 || tr.Reaped() {
			t.Fatalf("after Close: Used %d, Accounts %d, Reaped %v; want 0, 0, false", tr.Used(), tr.Accounts(), tr.Reaped())
		}
		if err := tr.ReserveDevice(1); !errors.Is(err, ErrClosed) {
			t.Fatalf("ReserveDevice after Close = %v, want ErrClosed", err)
		}
		if _, err := tr.NewAccount("b", 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("NewAccount after Close = %v, want ErrClosed", err)
		}
		if err := a.reserve(1); !errors.Is(err, ErrClosed) {
			t.Fatalf("Reserve of an account after the tracker's Close = %v, want ErrClosed", err)
		}
		tr.ReleaseDevice(1) // nothing to give back to; must not touch the region
		os.Remove(path)
	}
}

// The region's reads racing its Close, seen through the tracker alone
// (the tracker left open): zeros, never a crash.
func TestSharedUsedRacingRegionClose(t *testing.T) {
	dir := t.TempDir()
	for range 100 {
		path := filepath.Join(dir, "region")
		r, err := shm.Open(path, regionLayout, nil)
		if err != nil {
			t.Fatal(err)
		}
		slot, _ := r.Join(os.Getpid())
		tr, _ := New(1<<30, WithShared(mustShare(t, slot, 0)))
		var stop atomic.Bool
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for !stop.Load() {
					tr.Used()
				}
			})
		}
		r.Close()
		stop.Store(true)
		wg.Wait()
		if got := tr.Used(); got != 0 {
			t.Fatalf("Used after the region's Close = %d, want 0", got)
		}
		os.Remove(path)
	}
}
