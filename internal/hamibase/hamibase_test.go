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

func TestUnreserve(t *testing.T) {
	h := New(100, 2)
	if !h.Reserve(1, 60) {
		t.Fatal("Reserve(60) of 100 refused")
	}
	if h.Reserve(0, 60) {
		t.Fatal("Reserve(60) with 60 of 100 used admitted")
	}
	h.Unreserve(1, 60)
	if !h.Reserve(0, 100) {
		t.Fatal("Reserve(100) after Unreserve refused")
	}
	h.Unreserve(0, 1000) // clamps at zero
	if !h.Reserve(1, 100) {
		t.Fatal("Reserve(100) after an over-Unreserve refused")
	}
}
