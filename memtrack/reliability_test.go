package memtrack

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/shm"
)

var raceRounds int

// Issue 20, item 13: a Release racing Close must never remove a record of
// the account that reuses the closed account's id.
func TestReleaseRacingCloseSparesTheNextAccount(t *testing.T) {
	tr, err := New(1 << 40)
	if err != nil {
		t.Fatal(err)
	}
	rounds := 20000 // 3 in 20,000 rounds failed before Close waited for Releases
	if raceRounds > 0 {
		rounds = raceRounds // the detector slows a round 30-fold
	}
	if testing.Short() {
		rounds = 2000
	}
	const ptr, size = 0x7000_0000, 4096
	for round := range rounds {
		a, _ := tr.NewAccount("a", 1<<30)
		if err := a.reserve(size); err != nil {
			t.Fatal(err)
		}
		if err := a.record(ptr, size); err != nil {
			t.Fatal(err)
		}
		var b *Account
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = a.Release(ptr) })
		wg.Go(func() {
			_, _ = a.Close()
			b, _ = tr.NewAccount("b", 1<<30) // likely a's id again
			if err := b.reserve(size); err != nil {
				t.Error(err)
			}
			if err := b.record(ptr, size); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		if n, err := b.Release(ptr); err != nil || n != size {
			t.Fatalf("round %d: the next account's record is gone: Release = %d, %v", round, n, err)
		}
		if _, err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if tr.Used() != 0 {
			t.Fatalf("round %d: device total %d, want 0", round, tr.Used())
		}
	}
}

// Issue 20, items 3 and 10: a tracker whose slot was reaped refuses every
// Reserve with ErrReaped and its frees never move the node-wide total; the
// account limit's error is typed.
func TestReapedTrackerIsRefused(t *testing.T) {
	r, err := shm.Open(filepath.Join(t.TempDir(), "region"), regionLayout, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stalled, _ := r.Join(os.Getppid()) // a live process of ours that stopped beating
	tr, err := New(1<<30, WithShared(mustShare(t, stalled, 0)))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tr.NewAccount("a", 1<<30)
	if err := a.reserve(64 << 20); err != nil {
		t.Fatal(err)
	}
	if err := a.record(0x1000, 64<<20); err != nil {
		t.Fatal(err)
	}
	other, _ := r.Join(os.Getpid())
	if err := other.Usage(0).Add(1 << 20); err != nil {
		t.Fatal(err)
	}
	if !stalled.Leave() { // what the reaper does to it
		t.Fatal("Leave")
	}
	if !tr.Reaped() {
		t.Fatal("Reaped() false after the reap")
	}
	if err := a.reserve(1); !errors.Is(err, ErrReaped) {
		t.Fatalf("Reserve after the reap = %v, want ErrReaped", err)
	}
	if _, err := a.Release(0x1000); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := r.DeviceUsed(0); got != 1<<20 {
		t.Fatalf("node total %d after the reaped process freed, want the other member's %d", got, 1<<20)
	}
}

func TestTooManyAccountsIsTyped(t *testing.T) {
	tr, _ := New(1 << 30)
	for i := 0; ; i++ {
		_, err := tr.NewAccount("x", 1)
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrTooManyAccounts) {
			t.Fatalf("after %d accounts: %v, want ErrTooManyAccounts", i, err)
		}
		return
	}
}
