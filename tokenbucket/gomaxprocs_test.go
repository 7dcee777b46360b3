package tokenbucket

import (
	"runtime"
	"testing"
)

// A lease granted with GOMAXPROCS at 1 (testing.AllocsPerRun sets it) has
// one part: the parts per two Ps rounded down to none divided by zero.
func TestLeaseWithOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l, err := New(Config{SMs: 132, ThreadsPerSM: 2048, SMLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := l.NewStream(1)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		s.TryAcquire(1)
	}
}
