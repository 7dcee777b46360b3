// Package spin waits out calls that are leaving: a close that must not
// free what calls which passed their check still use (an account's id, a
// shared region's mapping, a stream's state) waits for their count to
// fall, yielding the processor a while and then napping.
package spin

import (
	"runtime"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/nap"
)

// yields is how many times Until yields before it naps: the calls it
// waits for are short and never block, so most waits end within them.
const yields = 100

// Until returns once done reports true: it yields the processor at first,
// then sleeps d between looks.
func Until(done func() bool, d time.Duration) {
	for spins := 0; !done(); spins++ {
		if spins < yields {
			runtime.Gosched()
		} else {
			nap.Sleep(d) // not a Go timer's millisecond (internal/nap)
		}
	}
}
