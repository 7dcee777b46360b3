package fcsp

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// SpinInDriver, given to WithHostWait, leaves Synchronize's wait to
// cuStreamSynchronize, which spins the calling OS thread in the driver.
const SpinInDriver time.Duration = -1

// adaptiveSpin is how long the default wait polls before it yields, once
// it polls at all.
const adaptiveSpin = 50 * time.Microsecond

// syncWaiters counts the process's Synchronize calls in flight, for
// adaptiveWait: the host's cores are the process's, whatever the pool.
var syncWaiters atomic.Int32

// adaptiveWait, the default, spins in the driver while the process's
// waiters leave the host cores to spare (at most half of them wait), and
// past that polls from Go, yielding after adaptiveSpin: a lone request
// gets the driver's latency, and 32 waiters on 16 cores share them through
// Go's scheduler instead of being descheduled by the kernel for
// milliseconds (H200 host, docs/BENCHMARKS.md run R: K=16 P99/P50 42 with
// the driver's wait, 1.65 polled; K=1 the same either way).
func adaptiveWait(limit int32) streamWait {
	poll := pollWait(adaptiveSpin)
	return func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}) error {
		n := syncWaiters.Add(1)
		defer syncWaiters.Add(-1)
		if n > limit || done != nil { // a wait that a ctx may end polls
			return poll(drv, ctx, s, done)
		}
		return driverWait(drv, ctx, s, done)
	}
}

// streamWait is the pool's way of waiting for a stream, chosen once at
// Open: done, where not nil, ends the wait early with errWaitEnded (a wait
// in the driver cannot be ended; SynchronizeContext runs it aside).
type streamWait func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}) error

var errWaitEnded = errors.New("wait ended")

func driverWait(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, _ <-chan struct{}) error {
	return drv.StreamSynchronize(ctx, s)
}

// pollWait waits by polling cuStreamQuery: without letting go of the
// goroutine's P for spin (a request's GPU work is often done within tens
// of microseconds, and a yield costs the waiter its P), then yielding
// between polls. Waiters past the spin then share the host's cores through
// Go's scheduler, which switches between them in microseconds, where a
// thread spinning in the driver is descheduled by the kernel for
// milliseconds once waiters outnumber cores (H200 host, 32 threads waiting
// for 40 µs kernels on 16 cores: P99 1.1 ms against 0.1 ms with 16
// threads; testdata/h200-syncwait.tsv).
func pollWait(spin time.Duration) streamWait {
	return func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}) error {
		var start time.Time
		for i := 0; ; i++ {
			err := drv.StreamQuery(ctx, s)
			if err == nil || !errors.Is(err, cuda.ErrorNotReady) {
				return err
			}
			select {
			case <-done:
				return errWaitEnded
			default:
			}
			switch {
			case i == 0:
				start = time.Now()
			case time.Since(start) >= spin:
				runtime.Gosched()
			}
		}
	}
}
