package fcsp

import (
	"errors"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// HostWait is how a goroutine waits for a stream's work in
// Stream.Synchronize and SynchronizeContext (WithHostWait).
type HostWait int

const (
	// WaitYield, the default, asks the driver whether the stream is done
	// and, while it is not, yields the goroutine's P before asking again.
	// Waiters then share the host's cores through Go's scheduler, which
	// switches between them in microseconds, and a waiting goroutine holds
	// no OS thread in the driver. With a core per waiter it answers as fast
	// as WaitSpin.
	WaitYield HostWait = iota
	// WaitSpin is cuStreamSynchronize: the driver spins the calling OS
	// thread until the work is done. While the host has a core for every
	// waiting thread that is the lowest latency; once waiters outnumber
	// cores the kernel deschedules spinning threads for milliseconds (on
	// the H200 host, 32 threads waiting for 40 µs kernels on 16 cores: P99
	// 1.1 ms against 0.1 ms with 16 threads; testdata/h200-syncwait.tsv).
	WaitSpin
)

func (w HostWait) String() string {
	switch w {
	case WaitYield:
		return "WaitYield"
	case WaitSpin:
		return "WaitSpin"
	}
	return "HostWait(?)"
}

// streamWait is the pool's way of waiting for a stream, chosen once at
// Open: done, where not nil, ends the wait early with errWaitEnded (a
// spinning wait cannot be ended; SynchronizeContext runs it aside).
type streamWait func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}) error

var errWaitEnded = errors.New("wait ended")

func spinWait(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, _ <-chan struct{}) error {
	return drv.StreamSynchronize(ctx, s)
}

// yieldWait polls with cuStreamQuery, yielding between polls. The first
// polls follow each other at once: a request's GPU work is often done
// within microseconds of the wait starting.
func yieldWait(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}) error {
	for {
		err := drv.StreamQuery(ctx, s)
		if err == nil || !errors.Is(err, cuda.ErrorNotReady) {
			return err
		}
		select {
		case <-done:
			return errWaitEnded
		default:
		}
		runtime.Gosched()
	}
}
