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
