package nap

import (
	"time"

	"golang.org/x/sys/unix"
)

// Sleep blocks the calling goroutine's thread for about d (see the package
// doc); a signal's interruption sleeps what is left.
func Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	for {
		if err := unix.Nanosleep(&ts, &ts); err != unix.EINTR {
			return
		}
	}
}
