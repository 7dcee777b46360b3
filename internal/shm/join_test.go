package shm

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 28, item 6: Join published the slot as active before it wrote the
// new member's identity, so a reaper in that window paired the new PID with
// the previous owner's start time and reaped a live process (1 to 16 in
// 100,000 joins); the member then failed every allocation with ErrReaped.
// A reaper must judge a member only by an identity of that membership, and
// reap a slot that is still joining only by a stale heartbeat (its joiner
// died or stalled mid-join), in which case Join must not hand it out.
func TestJoinIsNotReapedBeforeItsIdentity(t *testing.T) {
	ppid := os.Getppid() // alive, in our namespace, not us
	start := startTime(ppid)
	if start == 0 {
		t.Skip("no /proc: start times unknown, PID reuse is not detected here")
	}
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	// The slot's previous owner had ppid's PID and another start time: a
	// reused PID, correctly reaped, whose identity stays in the slot.
	prev, err := r.join(ppid, identity{ns: selfNS(), start: start + 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Reap(time.Hour); len(got) != 1 || got[0] != prev.Index() {
		t.Fatalf("the member with a reused PID was not reaped: %v", got)
	}

	var reaped []int
	testHookJoinClaimed = func(int) { reaped = append(reaped, r.Reap(time.Hour)...) }
	t.Cleanup(func() { testHookJoinClaimed = nil })
	s, err := r.join(ppid, identity{ns: selfNS(), start: start})
	testHookJoinClaimed = nil
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 0 || !s.Owned() {
		t.Fatalf("a live member was reaped while it joined (slots %v reaped, owned %v)", reaped, s.Owned())
	}
	if err := s.Usage(0).Add(1 << 20); err != nil {
		t.Fatalf("the new member's Add = %v", err)
	}
	if !s.Leave() {
		t.Fatal("Leave of the new member")
	}

	// A joiner that stalls mid-join past the timeout loses the slot to a
	// reaper, and Join goes on to another slot instead of returning one it
	// no longer owns.
	first := true
	testHookJoinClaimed = func(i int) {
		if !first {
			return
		}
		first = false
		r.beatWord(i).Store(monotonicNow() - uint64(time.Minute))
		reaped = append(reaped, r.Reap(time.Second)...)
	}
	s, err = r.join(ppid, identity{ns: selfNS(), start: start})
	testHookJoinClaimed = nil
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 1 {
		t.Fatalf("a slot whose joiner stalled past the timeout was not reaped: %v", reaped)
	}
	if !s.Owned() || s.Index() == reaped[0] {
		t.Fatalf("Join returned slot %d (owned %v), which a reaper took from it", s.Index(), s.Owned())
	}
	if err := s.Usage(0).Add(1); err != nil {
		t.Fatalf("Add in the slot Join returned = %v", err)
	}
	if got := r.DeviceUsed(0); got != 1 {
		t.Fatalf("device total %d, want 1", got)
	}
}

// The storm behind item 6: members with a reused PID (reaped, correctly)
// and live members take turns in a few slots while a reaper runs. No live
// member may ever be reaped.
func TestJoinStormNeverReapsTheLive(t *testing.T) {
	ppid := os.Getppid()
	start := startTime(ppid)
	if start == 0 {
		t.Skip("no /proc: start times unknown, PID reuse is not detected here")
	}
	r := openT(t, filepath.Join(t.TempDir(), "region"), Layout{Devices: 1, Slots: 2})
	const joins = 10000
	var stop atomic.Bool
	reaper := make(chan struct{})
	go func() {
		defer close(reaper)
		for !stop.Load() {
			r.Reap(time.Hour)
		}
	}()
	var lost atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range joins {
				if s, err := r.join(ppid, identity{ns: selfNS(), start: start + 1}); err == nil {
					s.Leave() // or the reaper did
				}
				s, err := r.join(ppid, identity{ns: selfNS(), start: start})
				if err != nil {
					continue // both slots held by reused-PID members
				}
				if s.Usage(0).Add(1) != nil || !s.Leave() {
					lost.Add(1)
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	<-reaper
	if n := lost.Load(); n > 0 {
		t.Fatalf("%d live members were reaped in %d joins", n, 2*joins)
	}
}
