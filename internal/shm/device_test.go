package shm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSlotDevice(t *testing.T) {
	r := openT(t, filepath.Join(t.TempDir(), "region"), testLayout)
	a, err := r.Join(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Join(os.Getpid() + 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []int{-1, 2} {
		if _, err := a.Device(dev); err == nil || !strings.Contains(err.Error(), "devices 0..1") {
			t.Errorf("Device(%d): %v", dev, err)
		}
	}
	da, _ := a.Device(1)
	db, _ := b.Device(1)
	da.Add(100)
	db.Add(20)
	da.Sub(40)
	if da.Used() != 80 || db.Used() != 80 || a.Usage(1).Load() != 60 {
		t.Fatalf("used %d/%d, slot a %d", da.Used(), db.Used(), a.Usage(1).Load())
	}
	if d0, _ := a.Device(0); d0.Used() != 0 {
		t.Fatalf("device 0 used %d", d0.Used())
	}
}
