package nap

import (
	"testing"
	"time"
)

func TestSleepSleeps(t *testing.T) {
	const d = 200 * time.Microsecond
	start := time.Now()
	Sleep(d)
	if took := time.Since(start); took < d {
		t.Fatalf("Sleep(%v) returned after %v", d, took)
	}
	Sleep(0)
	Sleep(-time.Second) // nothing to sleep: returns at once
}

// BenchmarkSleep puts Sleep beside time.Sleep for the same short times, and
// a clock read, the floor: ns/op is the time a sleep of d took.
func BenchmarkSleep(b *testing.B) {
	for _, d := range []time.Duration{50 * time.Microsecond, 250 * time.Microsecond} {
		b.Run("nap-"+d.String(), func(b *testing.B) {
			for range b.N {
				Sleep(d)
			}
		})
		b.Run("time.Sleep-"+d.String(), func(b *testing.B) {
			for range b.N {
				time.Sleep(d)
			}
		})
	}
	b.Run("clock", func(b *testing.B) {
		for range b.N {
			_ = time.Now()
		}
	})
}
