package shm

import "sync/atomic"

// Counter is a 64-bit counter updated with sync/atomic. It may point into a
// shared mapping (see [Region]) or into ordinary Go memory (see [CounterOf]),
// which lets callers use one code path for process-local and node-wide
// accounting. The zero Counter is invalid; see [Counter.Valid].
//
// Counter is a small value type: copy it freely. Its methods are tiny so
// that the compiler inlines them into hot paths.
type Counter struct{ p *uint64 }

// CounterOf returns a Counter backed by *p. p must be 8-byte aligned, which
// every uint64 field or variable is.
func CounterOf(p *uint64) Counter { return Counter{p} }

// Valid reports whether c refers to memory.
func (c Counter) Valid() bool { return c.p != nil }

// Load atomically loads the counter.
func (c Counter) Load() uint64 { return atomic.LoadUint64(c.p) }

// Store atomically stores v.
func (c Counter) Store(v uint64) { atomic.StoreUint64(c.p, v) }

// Add atomically adds d and returns the new value. To subtract x, add ^(x-1).
func (c Counter) Add(d uint64) uint64 { return atomic.AddUint64(c.p, d) }

// Sub atomically subtracts d, stopping at zero, and returns the new value:
// an unbalanced subtraction must not wrap a total to 1.8e19 and refuse
// every later reservation.
func (c Counter) Sub(d uint64) uint64 {
	for {
		v := atomic.LoadUint64(c.p)
		n := v - min(d, v)
		if atomic.CompareAndSwapUint64(c.p, v, n) {
			return n
		}
	}
}

// Swap atomically stores v and returns the previous value.
func (c Counter) Swap(v uint64) uint64 { return atomic.SwapUint64(c.p, v) }

// CompareAndSwap executes the compare-and-swap operation for the counter.
func (c Counter) CompareAndSwap(old, new uint64) bool {
	return atomic.CompareAndSwapUint64(c.p, old, new)
}
