package shm

import (
	"os"
	"path/filepath"
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
