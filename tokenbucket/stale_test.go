package tokenbucket

import (
	"sync/atomic"
	"testing"
)

// A caller that read the clock, was descheduled, and reached its CAS after
// another caller charged at a later reading saw the bucket a whole burst
// behind and was refused though the tokens were there (cmd/hotpath on the
// H200: 3-7 refusals in 6 rounds at a rate that never refuses). A refusal
// is now decided on a fresh reading.
func TestStaleReadingIsNotAFalseRefusal(t *testing.T) {
	const ms = int64(1e6)
	var clk atomic.Int64
	b, err := NewBucket(1000, 1, WithClock(clk.Load)) // 1 token a ms, burst 1
	if err != nil {
		t.Fatal(err)
	}
	clk.Store(10 * ms)
	stale := clk.Load() // caller A reads the clock ...
	clk.Store(11 * ms)
	if _, ok := b.tryAt(1, 10*ms); !ok { // ... B charges at 10 ms (bucket empty until 11)
		t.Fatal("first acquire refused")
	}
	if _, ok := b.tryAt(1, stale); !ok { // A reaches its CAS at 11 ms with its 10 ms reading
		t.Fatal("refused on a stale reading: at 11 ms the bucket holds a token")
	}
	// A real refusal stays a refusal: at 11 ms the token was just taken.
	if _, ok := b.tryAt(1, clk.Load()); ok {
		t.Fatal("admitted beyond the rate")
	}
}
