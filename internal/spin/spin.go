// Package spin waits out calls that are leaving: a close that must not
// free what calls which passed their check still use (an account's id, a
// shared region's mapping, a stream's state) waits for their count to
// fall, yielding the processor a while and then napping.
package spin

import (
	"runtime"
	"time"
)

// yields is how many times Until yields before it naps: the calls it
// waits for are short and never block, so most waits end within them.
const yields = 100

// Until returns once done reports true: it yields the processor at first,
// then sleeps d between looks.
func Until(done func() bool, d time.Duration) {
	for spins := 0; !done(); spins++ {
		Step(spins, d)
	}
}

// Step is the wait between a loop's looks, the spins-th (from 0): it
// yields the processor for the first looks, then sleeps d. For a loop
// that looks at more than Until's done between waits (a context, who
// waits).
//
// It sleeps on a Go timer, which may wake a millisecond late, not on the
// thread (internal/nap): what it waits for is other goroutines' calls, and
// a thread asleep in the kernel keeps its processor from them until the
// runtime takes it back. (memtrack's tests under -race, which wait here
// most, took 68.7-83.5 s in 4 runs with the timer and 81.4-94.4 s in 3
// with the thread's sleep on the 2-core VM: no difference the noise
// resolves, and none to pay for.)
func Step(spins int, d time.Duration) {
	if spins < yields {
		runtime.Gosched()
	} else {
		time.Sleep(d)
	}
}
