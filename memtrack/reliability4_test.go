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

// Issue 39, item 3: an account whose owner charges the device (a pooled
// tenant's engine charges what its pool maps) counts its quota alone:
// none of its reservations, releases or its Close moves the device total,
// which the owner's ReserveDevice charges.
func TestAccountChargedApart(t *testing.T) {
	tr, err := New(1<<30, WithLeaseChunk(0))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tr.NewAccount("a", 64<<20)
	if err := a.ChargeDeviceApart(); err != nil {
		t.Fatal(err)
	}
	if err := tr.ReserveDevice(32 << 20); err != nil { // its pool's chunk
		t.Fatal(err)
	}
	r, err := a.Reserve(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Commit(0x1000); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reserve(64 << 20); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("over the quota: %v", err)
	}
	if got := tr.Used(); got != 32<<20 {
		t.Fatalf("device total %d, want the owner's 32 MiB alone", got)
	}
	if got := tr.Room(1 << 40); got != 1<<30-32<<20 {
		t.Fatalf("Room %d, want the limit less the owner's charge", got)
	}
	if err := a.ChargeDeviceApart(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an account holding bytes changed its charge: %v", err)
	}
	if n, err := a.Release(0x1000); err != nil || n != 1<<20 {
		t.Fatal(n, err)
	}
	if _, err := a.Reserve(2 << 20); err != nil { // leaked: Close forgets it
		t.Fatal(err)
	}
	if leaked, err := a.Close(); err != nil || leaked != 2<<20 {
		t.Fatal(leaked, err)
	}
	if got := tr.Used(); got != 32<<20 {
		t.Fatalf("device total %d after the account closed, want the owner's 32 MiB", got)
	}
	tr.ReleaseDevice(32 << 20)
	if tr.Used() != 0 {
		t.Fatalf("device total %d", tr.Used())
	}
}

// Tracker.Room: the device counter settles it where it leaves want; the
// leases, which it counts too, are walked only where it does not.
func TestRoomCountsLeasesAsRoom(t *testing.T) {
	tr, err := New(64<<20, WithLeaseChunk(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := tr.NewAccount("a", 64<<20)
	if err := a.reserve(4 << 20); err != nil { // takes a lease along
		t.Fatal(err)
	}
	if got := tr.Room(8 << 20); got != 8<<20 {
		t.Fatalf("Room(8 MiB) = %d", got)
	}
	if got := tr.Room(1 << 40); got != 60<<20 {
		t.Fatalf("Room = %d MiB, want 60: a lease is room", got>>20)
	}
	if _, err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if tr.Room(1) != 0 {
		t.Fatal("a closed tracker has room")
	}
}
