package shm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Issue 20, item 3: a live member that stalled past the timeout is reaped;
// its later writes are refused (ErrReaped), never subtracted again (the
// total wrapped to about 1.8e19 before) and never land in the slot's next
// member's count.
func TestReapedMemberIsRefused(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	stalled, err := r.Join(os.Getppid()) // alive, in our namespace, not us
	if err != nil {
		t.Fatal(err)
	}
	if err := stalled.Usage(0).Add(64 << 20); err != nil {
		t.Fatal(err)
	}
	r.beatWord(stalled.Index()).Store(monotonicNow() - uint64(time.Minute))
	if got := r.Reap(time.Second); len(got) != 1 {
		t.Fatalf("stalled member not reaped: %v", got)
	}
	if err := stalled.Usage(0).Sub(64 << 20); !errors.Is(err, ErrReaped) {
		t.Fatalf("Sub after the reap = %v, want ErrReaped", err)
	}
	if got := r.DeviceUsed(0); got != 0 {
		t.Fatalf("device total %d after a reaped member's free, want 0", got)
	}
	next, err := r.Join(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if next.Index() != stalled.Index() {
		t.Fatalf("next member got slot %d, want the reaped slot %d", next.Index(), stalled.Index())
	}
	if err := stalled.Usage(0).Add(1 << 20); !errors.Is(err, ErrReaped) {
		t.Fatalf("Add into the next member's slot = %v, want ErrReaped", err)
	}
	if stalled.Owned() || stalled.Beat() || stalled.Leave() {
		t.Fatal("the reaped membership still acts as the owner")
	}
	if got := next.Usage(0).Load(); got != 0 || r.DeviceUsed(0) != 0 {
		t.Fatalf("next member counts %d, device %d; want 0 and 0", got, r.DeviceUsed(0))
	}
	// Counters cannot wrap, in either direction.
	u := next.Usage(0)
	if err := u.Add(10); err != nil {
		t.Fatal(err)
	}
	if err := u.Sub(11); err != nil || u.Load() != 0 {
		t.Fatalf("Sub past zero: %v, left %d", err, u.Load())
	}
	if err := u.Add(MaxUsage + 1); !errors.Is(err, ErrUsageRange) {
		t.Fatalf("Add past MaxUsage = %v", err)
	}
	c := CounterOf(new(uint64))
	c.Add(5)
	if c.Sub(6) != 0 {
		t.Fatal("Counter.Sub wrapped below zero")
	}
}

// Issue 20, item 4: PIDs mean something only in their namespace. A live
// member of another namespace whose PID is free in ours is kept while it
// beats; a dead member of another namespace whose PID is ours is reaped by
// its heartbeat; a PID reused by a process started at another time is
// dead.
func TestReapAcrossPIDNamespaces(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	other := selfNS() + 1
	alien, err := r.join(deadPID(t), identity{ns: other})
	if err != nil {
		t.Fatal(err)
	}
	_ = alien.Usage(0).Add(60 << 20)
	if got := r.Reap(2 * time.Second); len(got) != 0 {
		t.Fatalf("a beating member of another namespace was reaped (its PID is free in ours): %v", got)
	}
	twin, err := r.join(os.Getpid(), identity{ns: other}) // our PID, another container
	if err != nil {
		t.Fatal(err)
	}
	_ = twin.Usage(0).Add(1 << 20)
	r.beatWord(twin.Index()).Store(monotonicNow() - uint64(time.Minute))
	if got := r.Reap(2 * time.Second); len(got) != 1 || got[0] != twin.Index() {
		t.Fatalf("a dead member of another namespace with our PID was not reaped: %v", got)
	}
	reused, err := r.join(os.Getppid(), identity{ns: selfNS(), start: startTime(os.Getppid()) + 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Reap(time.Hour); len(got) != 1 || got[0] != reused.Index() {
		t.Fatalf("a member whose PID was reused by another process was not reaped: %v", got)
	}
	if got := r.DeviceUsed(0); got != 60<<20 {
		t.Fatalf("device total %d, want the live alien's 60 MiB", got)
	}
	if startTime(os.Getpid()) == 0 {
		t.Log("no /proc: start times unknown, PID reuse is not detected here")
	}
}

// Issue 20, item 12: usage left in a slot that is not active (a stale
// write, a crash mid-reap) does not count, and Join gives the new member a
// clean slot.
func TestRegionHeals(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	for i := range testLayout.Slots {
		r.usageWord(i, 1).Store(3 << 30) // garbage in every free slot
	}
	if got := r.DeviceUsed(1); got != 0 {
		t.Fatalf("free slots count %d bytes", got)
	}
	s, err := r.Join(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Usage(1).Load(); got != 0 || r.DeviceUsed(1) != 0 {
		t.Fatalf("a new member starts with %d bytes (device %d)", got, r.DeviceUsed(1))
	}
}

// Region files are opened without following links and refused when
// another user owns them or every user may write them, unless the caller
// opts in.
func TestRegionFileChecks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "region")
	openT(t, path, testLayout)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link, testLayout, nil); !errors.Is(err, ErrUnsafeRegion) {
		t.Fatalf("Open through a symlink = %v, want ErrUnsafeRegion", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, testLayout, nil); !errors.Is(err, ErrUnsafeRegion) {
		t.Fatalf("Open of a world-writable region = %v, want ErrUnsafeRegion", err)
	}
	r, err := Open(path, testLayout, &Options{AllowForeign: true})
	if err != nil {
		t.Fatalf("opted in: %v", err)
	}
	r.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the foreign-owner case needs chown")
		return
	}
	if err := os.Chown(path, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, testLayout, nil); !errors.Is(err, ErrUnsafeRegion) {
		t.Fatalf("Open of another user's region = %v, want ErrUnsafeRegion", err)
	}
}
