package life

import (
	"sync/atomic"
	"testing"
)

// BenchmarkLifeLock is the price a call pays to be counted in and out:
// call (Enter/Exit), wait (EnterWait/ExitWait), beside the floor of two
// atomic adds on one padded counter per goroutine, all run in parallel.
func BenchmarkLifeLock(b *testing.B) {
	no := func() bool { return false }
	b.Run("call", func(b *testing.B) {
		var l Lock
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s, _ := l.Enter(no)
				l.Exit(s)
			}
		})
	})
	b.Run("wait", func(b *testing.B) {
		var l Lock
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s, _ := l.EnterWait(no)
				l.ExitWait(s)
			}
		})
	})
	b.Run("floor-atomic", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			var n struct {
				atomic.Int64
				_ [120]byte
			}
			for pb.Next() {
				n.Add(1)
				n.Add(-1)
			}
		})
	})
}
