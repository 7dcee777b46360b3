// Package nap sleeps for short times, tens of microseconds to a few
// milliseconds, without the Go timer's floor.
//
// A Go timer (time.Sleep, time.NewTimer) in a process whose processors are
// idle wakes about a millisecond late whatever it was asked: the runtime
// then waits in its network poller (once one is in use, as in any server),
// and on Linux that wait's timeout is whole milliseconds, at least one
// (runtime/netpoll_epoll.go). On the development VM a 50 µs time.Sleep
// took 1.09 ms at the median (BenchmarkSleep). The SDK's short waits (the queue bound's admission
// waiting for the kernel ahead to near its end, a growth polling for the
// work queued on its SMs) poll at tens of microseconds, and a millisecond
// late there is a millisecond of idle GPU or of a burst's wait. On Linux
// Sleep asks the kernel itself (nanosleep, which blocks the OS thread,
// not the processor: the runtime hands the processor on), which wakes
// within the thread's timer slack, 50 µs by default.
//
// A sleeping thread is an OS thread held, and its processor until the
// runtime takes it back, so Sleep is for waits on the GPU that few
// goroutines make at once: the queue bound's one waiter per tenant (its
// turn), a growth's poll under the move lock. Waits for other goroutines'
// calls to leave keep the Go timer (internal/spin.Step), as do the token
// bucket's waiters, as many as the goroutines a server throttles
// (tokenbucket's BenchmarkAccuracySlow: 500 µs waits admit 0.89-0.91 of
// the rate there, as x/time/rate's do).
package nap

import "time"

// Long is the longest sleep that should use Sleep: past it a Go timer's
// millisecond is small, and a Go timer can be woken by a context.
const Long = 2 * time.Millisecond
