package fcsp

import "testing"

func TestDevicePtrPointer(t *testing.T) {
	for _, p := range []DevicePtr{0, 0x7f0000001000, 1<<63 | 0x10} {
		if got := uint64(uintptr(p.Pointer())); got != uint64(p) {
			t.Fatalf("DevicePtr(%v).Pointer() = %#x, want %#x", p, got, uint64(p))
		}
	}
}
