package fcsp

import (
	"errors"
	"runtime"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// SpinInDriver, the default of WithHostWait, leaves Synchronize's wait to
// cuStreamSynchronize, which spins the calling OS thread in the driver.
const SpinInDriver time.Duration = -1

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
