package shm

import (
	"os"
	"path/filepath"
	"testing"
)

// A member counts in the region while it lives, and its Close leaves the
// slot (the total drops) and unmaps the region (reads then say 0).
func TestMemberLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "region")
	m, err := JoinMember(MemberConfig{Path: path, Layout: Layout{Devices: 2, Slots: 4}, PID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.Device(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Add(1 << 20); err != nil {
		t.Fatal(err)
	}
	if got := m.DeviceUsed(1); got != 1<<20 {
		t.Fatalf("DeviceUsed %d; want %d", got, 1<<20)
	}
	if s := m.Slots(); len(s) != 1 || s[0].PID != os.Getpid() || s[0].Usage[1] != 1<<20 {
		t.Fatalf("Slots %+v; want this process's one, with its 1 MiB on device 1", s)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.DeviceUsed(1); got != 0 {
		t.Fatalf("DeviceUsed after Close %d; want 0", got)
	}
	if got := m.Read(func() uint64 { return 7 }); got != 0 {
		t.Fatalf("Read after Close ran f")
	}
	if s := m.Slots(); s != nil {
		t.Fatalf("Slots after Close %+v", s)
	}
	var none *Member
	if s := none.Slots(); s != nil {
		t.Fatalf("a nil Member's Slots %+v", s)
	}
	if err := none.Close(); err != nil {
		t.Fatal(err)
	}
}
