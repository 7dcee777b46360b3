package tokenbucket

import (
	"testing"
	"time"
)

// Two buckets in series (stream and device) repay an oversized charge as
// exactly as one: time a bucket spends full between looks repays debt.
func TestOversizeRepaidWhileUnobserved(t *testing.T) {
	var clk fakeClock
	l, _ := New(Config{SMs: 1, ThreadsPerSM: 1e6, SMLimit: 0.25, Dampening: 1, Penalty: NoPenalty, Clock: clk.Now})
	s, _ := l.NewStream(1)
	n := 0
	for range 100000 { // 1 s
		clk.Advance(10 * time.Microsecond)
		if s.TryAcquire(2e6) { // 8 ms of the bucket's time, twice its burst
			n++
		}
	}
	if n != 125 {
		t.Errorf("admitted %d oversized launches in 1 s, want 125 (one per 8 ms)", n)
	}
}
