package shm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

func TestJoinDevice(t *testing.T) {
	cfg := MemberConfig{Path: filepath.Join(t.TempDir(), "region"), Layout: testLayout, PID: os.Getpid()}
	if _, _, err := JoinDevice(cfg, testLayout.Devices); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Fatalf("a device past the layout: %v", err)
	}
	m, share, err := JoinDevice(cfg, testLayout.Devices-1)
	if err != nil {
		t.Fatal(err)
	}
	if share == nil {
		t.Fatal("no share of the device")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// A pool without a shared region keeps a nil Member: it reads its own
// figures, and nobody else's.
func TestNilMember(t *testing.T) {
	var m *Member
	if got := m.Read(func() uint64 { return 7 }); got != 7 {
		t.Fatalf("Read = %d; want f's 7", got)
	}
	if got := m.DeviceUsed(0); got != 0 {
		t.Fatalf("DeviceUsed = %d", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
