package tokenbucket

import (
	"testing"
	"time"
)

// Giving back an acquire after a rate change returns the tokens it took,
// not the nanoseconds: they were charged at the old token interval. A
// waiter that SetSMLimit wakes gives its reservation back this way before
// it reserves again, so the error came with every limit change that found
// a waiter: 4x the tokens given back after the rate rose 4x, a quarter
// after it fell 4x.
func TestGiveBackAcrossSetRate(t *testing.T) {
	for _, newRate := range []float64{4000, 250} {
		var clk fakeClock
		b, err := NewBucket(1000, 100, WithClock(clk.Now)) // 1 token a ms, burst 100
		if err != nil {
			t.Fatal(err)
		}
		if !b.TryAcquire(50) {
			t.Fatal("refused with a full bucket")
		}
		_, _, k := b.reserveAt(20, clk.Now()) // 30 left
		if err := b.SetRate(newRate); err != nil {
			t.Fatal(err)
		}
		b.giveBack(k) // 50 again
		if !b.TryAcquire(49.9) {
			t.Errorf("rate 1000 -> %v: fewer than 50 tokens after the give-back", newRate)
		}
		if b.TryAcquire(0.2) {
			t.Errorf("rate 1000 -> %v: more than 50 tokens after the give-back", newRate)
		}
		clk.Advance(time.Second)
	}
}
