package hamibase

import "testing"

func TestBaselineEnforcesLimits(t *testing.T) {
	h := New(100, 4)
	if !h.Reserve(0, 60) || h.Reserve(1, 50) {
		t.Fatal("the device limit must hold across slots")
	}
	h.Record(0, 0x10, 60)
	if h.Release(1, 0x10) {
		t.Fatal("another slot's pointer was released")
	}
	if !h.Release(0, 0x10) || !h.Cycle(1, 0x20, 100) || h.Slots() != 4 {
		t.Fatal("release and cycle must succeed")
	}
}
