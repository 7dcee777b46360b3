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
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.DeviceUsed(1); got != 0 {
		t.Fatalf("DeviceUsed after Close %d; want 0", got)
	}
	if got := m.Read(func() uint64 { return 7 }); got != 0 {
		t.Fatalf("Read after Close ran f")
	}
	var none *Member
	if err := none.Close(); err != nil {
		t.Fatal(err)
	}
}
