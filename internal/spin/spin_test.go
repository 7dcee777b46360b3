package spin

import (
	"sync/atomic"
	"testing"
	"time"
)

// Until returns at once when done, and waits for a count that falls
// later, past its yields, without missing it.
func TestUntil(t *testing.T) {
	looks := 0
	Until(func() bool { looks++; return true }, time.Millisecond)
	if looks != 1 {
		t.Fatalf("done at once: %d looks", looks)
	}
	var n atomic.Int32
	n.Store(1)
	go func() {
		time.Sleep(20 * time.Millisecond) // past the yields: Until naps by then
		n.Store(0)
	}()
	start := time.Now()
	Until(func() bool { return n.Load() == 0 }, 50*time.Microsecond)
	if n.Load() != 0 {
		t.Fatal("returned before done")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("returned after %v, before the count fell", d)
	}
}

// A wait whose done is already true makes no garbage: the callers close
// tenants and streams a server makes by the hundred thousand a second.
func TestUntilMakesNoGarbage(t *testing.T) {
	var n atomic.Int32
	if a := testing.AllocsPerRun(100, func() { Until(func() bool { return n.Load() == 0 }, time.Microsecond) }); a != 0 {
		t.Fatalf("%v allocations a wait", a)
	}
}
