package shm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Issue 28, item 9: the slot's generation was 16 bits. After 65,535
// memberships of one slot while a reaped member was stopped, the slot's
// generation came round to the stopped member's again, and its late free
// landed in the live member's count. A reaped member must stay refused
// however many memberships the slot has had since.
func TestReapedMemberAfterManyMemberships(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), Layout{Devices: 1, Slots: 1})
	stalled, err := r.join(os.Getppid(), identity{ns: selfNS()}) // alive, not us
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
	// 1<<16 - 1 memberships: the 16-bit generation (which skipped 0) came
	// back to the stalled member's with the last of them.
	const memberships = 1<<16 - 1
	var live *Slot
	for k := 1; k <= memberships; k++ {
		s, err := r.join(os.Getpid(), identity{ns: selfNS()})
		if err != nil {
			t.Fatalf("membership %d: %v", k, err)
		}
		if k == memberships {
			live = s
		} else if !s.Leave() {
			t.Fatalf("membership %d: Leave", k)
		}
	}
	if err := live.Usage(0).Add(10 << 20); err != nil {
		t.Fatal(err)
	}
	if err := stalled.Usage(0).Sub(64 << 20); !errors.Is(err, ErrReaped) {
		t.Errorf("the stalled member's late Sub = %v, want ErrReaped", err)
	}
	if err := stalled.Usage(0).Add(1 << 20); !errors.Is(err, ErrReaped) {
		t.Errorf("the stalled member's late Add = %v, want ErrReaped", err)
	}
	if got := stalled.Usage(0).Load(); got != 0 {
		t.Errorf("the stalled member reads %d bytes of the live member's count", got)
	}
	if stalled.Owned() || stalled.Beat() || stalled.Leave() {
		t.Error("the stalled membership acts as the owner of the live member's slot")
	}
	if got, dev := live.Usage(0).Load(), r.DeviceUsed(0); got != 10<<20 || dev != 10<<20 {
		t.Fatalf("the live member counts %d bytes, the device %d; want 10 MiB and 10 MiB", got, dev)
	}
}
