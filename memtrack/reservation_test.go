package memtrack

import (
	"errors"
	"testing"
)

func TestReservationCommitAndCancel(t *testing.T) {
	tr := mustTracker(t, 10*miB)
	a := mustAccount(t, tr, "a", 8*miB)

	r, err := a.Reserve(3 * miB)
	if err != nil {
		t.Fatal(err)
	}
	if a.Used() != 3*miB || tr.Used() != 3*miB || r.Size() != 3*miB {
		t.Fatalf("reserved: used %d, device %d, size %d", a.Used(), tr.Used(), r.Size())
	}
	r.Cancel()
	r.Cancel() // settled: nothing more to give back
	if a.Used() != 0 || tr.Used() != 0 {
		t.Fatalf("cancelled twice: used %d, device %d", a.Used(), tr.Used())
	}
	if err := r.Commit(0x1000); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Commit after Cancel: %v", err)
	}

	r, _ = a.Reserve(2 * miB)
	if err := r.Commit(0x1000); err != nil {
		t.Fatal(err)
	}
	r.Cancel() // after Commit: a no-op, the bytes are the allocation's
	if a.Used() != 2*miB {
		t.Fatalf("Cancel after Commit changed used to %d", a.Used())
	}
	// A pointer already live: the commit fails and gives the bytes back.
	r2, _ := a.Reserve(miB)
	if err := r2.Commit(0x1000); err == nil {
		t.Fatal("Commit of a live pointer succeeded")
	}
	if a.Used() != 2*miB {
		t.Fatalf("failed Commit left used at %d, want %d", a.Used(), 2*miB)
	}
	if n, err := a.Release(0x1000); err != nil || n != 2*miB || a.Used() != 0 || tr.Used() != 0 {
		t.Fatalf("Release = %d, %v; used %d, device %d", n, err, a.Used(), tr.Used())
	}

	var zero Reservation
	zero.Cancel()
	if err := zero.Commit(1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("zero Reservation Commit: %v", err)
	}
}

// A free the driver refuses keeps the allocation tracked: its bytes never
// stop counting, so a reservation racing the failed free cannot take them
// (the old Release-then-Reserve-again lost them when it did).
func TestPendingReleaseCancelKeepsTracking(t *testing.T) {
	tr := mustTracker(t, 4*miB)
	a := mustAccount(t, tr, "a", 4*miB)
	b := mustAccount(t, tr, "b", 4*miB)
	r, _ := a.Reserve(4 * miB)
	if err := r.Commit(0x2000); err != nil {
		t.Fatal(err)
	}
	pr, err := a.StartRelease(0x2000)
	if err != nil || pr.Size() != 4*miB {
		t.Fatalf("StartRelease = %d, %v", pr.Size(), err)
	}
	if _, err := a.StartRelease(0x2000); !errors.Is(err, ErrUnknownPointer) {
		t.Fatalf("second StartRelease of one pointer: %v", err)
	}
	if _, err := b.Reserve(miB); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("another tenant took bytes still being freed: %v", err)
	}
	if err := pr.Cancel(); err != nil { // the driver refused the free
		t.Fatal(err)
	}
	if err := pr.Cancel(); err != nil || pr.Size() != 0 {
		t.Fatalf("second Cancel: %v, size %d", err, pr.Size())
	}
	if a.Used() != 4*miB || tr.Used() != 4*miB {
		t.Fatalf("after a refused free: used %d, device %d", a.Used(), tr.Used())
	}
	if live := a.Live(); len(live) != 1 || live[0].Ptr != 0x2000 {
		t.Fatalf("after a refused free the record is %v", live)
	}
	pr, err = a.StartRelease(0x2000)
	if err != nil {
		t.Fatal(err)
	}
	pr.Commit()
	pr.Commit()
	if a.Used() != 0 || tr.Used() != 0 || len(a.Live()) != 0 {
		t.Fatalf("after the free: used %d, device %d, live %v", a.Used(), tr.Used(), a.Live())
	}
}

func TestPendingReleaseAcrossClose(t *testing.T) {
	tr := mustTracker(t, 4*miB)
	a := mustAccount(t, tr, "a", 4*miB)
	r, _ := a.Reserve(miB)
	_ = r.Commit(0x3000)
	pr, err := a.StartRelease(0x3000)
	if err != nil {
		t.Fatal(err)
	}
	if leaked, err := a.Close(); err != nil || leaked != miB {
		t.Fatalf("Close = %d, %v", leaked, err)
	}
	if err := pr.Cancel(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Cancel after Close: %v", err)
	}
	if tr.Used() != 0 {
		t.Fatalf("device used %d after Close", tr.Used())
	}
	if _, err := a.StartRelease(0x3000); !errors.Is(err, ErrClosed) {
		t.Fatalf("StartRelease after Close: %v", err)
	}
	if _, err := a.Reserve(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reserve after Close: %v", err)
	}
}
