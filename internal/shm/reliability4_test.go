package shm

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// Issue 39 #16: a dead predecessor with this process's PID in this
// process's PID namespace (a restarted container's PID 1) is reaped, its
// start time showing that it was another process; before, a slot of our
// PID was taken for ours and never reaped, and its usage counted against
// the node's limit. Our own membership is kept, however late its beat.
func TestReapPredecessorWithOurPID(t *testing.T) {
	self := os.Getpid()
	start := startTime(self)
	if start == 0 {
		t.Skip("no /proc: start times unknown, a predecessor of our PID cannot be told from us")
	}
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	prev, err := r.join(self, identity{ns: selfNS(), start: start + 1}) // what the previous PID 1 left
	if err != nil {
		t.Fatal(err)
	}
	if err := prev.Usage(0).Add(96 << 20); err != nil {
		t.Fatal(err)
	}
	us, err := r.Join(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := us.Usage(0).Add(1 << 20); err != nil {
		t.Fatal(err)
	}
	r.beatWord(us.Index()).Store(monotonicNow() - uint64(time.Minute)) // a stall: still us
	if got := r.Reap(time.Hour); len(got) != 1 || got[0] != prev.Index() {
		t.Fatalf("reaped %v; want the predecessor's slot %d alone", got, prev.Index())
	}
	if got := r.DeviceUsed(0); got != 1<<20 {
		t.Fatalf("device total %d after the reap; want our 1 MiB alone", got)
	}
	if !us.Owned() {
		t.Fatal("our own membership was reaped")
	}
	if got := r.Reap(time.Nanosecond); len(got) != 0 {
		t.Fatalf("our own stalled membership reaped by timeout: %v", got)
	}
}

// Issue 39 #17: a region file truncated while mapped (a stray truncate, a
// region "reset" by hand) killed every member with SIGBUS at its next
// access. The member gets ErrBadRegion from its writes and zeros or
// nothing from its reads instead, and closes cleanly.
func TestTruncatedRegionIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	lost := make(chan error, 1)
	m, share, err := JoinDevice(MemberConfig{Path: path, Layout: testLayout, PID: os.Getpid(), Beat: time.Millisecond, ReapAfter: time.Hour,
		OnLost:   func(err error) { lost <- err },
		OnReaped: func() { t.Error("a lost region heard as a reap") },
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := share.Add(8 << 20); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if err := share.Add(1 << 20); !errors.Is(err, ErrBadRegion) {
		t.Fatalf("Add on a truncated region: %v; want ErrBadRegion", err)
	}
	if err := share.Sub(1 << 20); !errors.Is(err, ErrBadRegion) {
		t.Fatalf("Sub on a truncated region: %v; want ErrBadRegion", err)
	}
	if got := share.Used(); got != 0 {
		t.Fatalf("Used on a truncated region: %d", got)
	}
	if got := m.DeviceUsed(0); got != 0 {
		t.Fatalf("DeviceUsed on a truncated region: %d", got)
	}
	if s := m.Slots(); s != nil {
		t.Fatalf("Slots on a truncated region: %v", s)
	}
	r := m.Slot().Region()
	if got := r.Reap(time.Nanosecond); got != nil {
		t.Fatalf("Reap on a truncated region: %v", got)
	}
	if m.Slot().Owned() || m.Slot().Beat() {
		t.Fatal("a slot of a truncated region is still owned")
	}
	if _, err := r.Join(os.Getpid()); !errors.Is(err, ErrBadRegion) {
		t.Fatalf("Join on a truncated region: %v; want ErrBadRegion", err)
	}
	select { // the heartbeat finds the region lost too, and says so
	case err := <-lost:
		if !errors.Is(err, ErrBadRegion) || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("OnLost heard %v; want ErrBadRegion saying the file was truncated", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat did not report the lost region")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// A fault recovered for the region is the region's alone: a panic of
// another kind inside a call still panics, and a goroutine's own
// SetPanicOnFault setting is kept.
func TestRegionGuardKeepsOtherPanics(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	func() {
		defer func() {
			if v := recover(); v == nil {
				t.Fatal("a bad device index did not panic")
			}
		}()
		r.DeviceUsed(testLayout.Devices)
	}()
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	r.DeviceUsed(0)
	if !debug.SetPanicOnFault(true) {
		t.Fatal("a region call reset the goroutine's SetPanicOnFault")
	}
	debug.SetPanicOnFault(false)
	r.DeviceUsed(0)
	if debug.SetPanicOnFault(false) {
		t.Fatal("a region call left SetPanicOnFault on")
	}
}
