package memtrack

import (
	"testing"
	"unsafe"
)

// TestAccountCountersPadded: every cache line that holds a byte of the
// counters reservations write (used to ops) holds only the account's own
// bytes, whatever the object's alignment; and the account stays in its
// size class (160 B: it is garbage of every tenant made and closed).
func TestAccountCountersPadded(t *testing.T) {
	var a Account
	first, last := unsafe.Offsetof(a.used), unsafe.Offsetof(a.ops)+unsafe.Sizeof(a.ops)
	if first < cacheLine-1 || unsafe.Sizeof(a)-last < cacheLine-1 {
		t.Fatalf("counters at [%d, %d) of %d bytes: want a cache line of the account's own on each side", first, last, unsafe.Sizeof(a))
	}
	if unsafe.Sizeof(a) > 160 {
		t.Fatalf("Account is %d bytes; it was 160", unsafe.Sizeof(a))
	}
}
