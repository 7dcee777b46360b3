// Package hostwait is how a pool's host threads wait for a stream: in the
// driver (cuStreamSynchronize, which spins the OS thread), by polling
// cuStreamQuery from Go, or adaptively between the two. The policy is
// chosen once, when the pool opens (fcsp.WithHostWait).
package hostwait

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Wait waits for stream s with ctx: done, where not nil, ends the wait
// early with ErrEnded (a wait in the driver cannot be ended; callers run it
// aside).
type Wait func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}) error

// ErrEnded: a wait ended by its done channel before the stream's work did.
var ErrEnded = errors.New("wait ended")

// AdaptiveSpin is how long the adaptive wait polls before it yields, once
// it polls at all.
const AdaptiveSpin = 50 * time.Microsecond

// Waiters counts the process's waits in flight, for Adaptive: the host's
// cores are the process's, whatever the pool.
var Waiters atomic.Int32

// Adaptive, the default, spins in the driver while the process's waiters
// leave the host cores to spare (at most limit of them wait), and past that
// polls from Go, yielding after AdaptiveSpin: a lone request gets the
// driver's latency, and 32 waiters on 16 cores share them through Go's
// scheduler instead of being descheduled by the kernel for milliseconds
// (H200 host, docs/BENCHMARKS.md run R: K=16 P99/P50 42 with the driver's
// wait, 1.65 polled; K=1 the same either way).
func Adaptive(limit int32) Wait {
	poll := Poll(AdaptiveSpin)
	return func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}) error {
		n := Waiters.Add(1)
		defer Waiters.Add(-1)
		if n > limit || done != nil { // a wait that a ctx may end polls
			return poll(drv, ctx, s, done)
		}
		return Driver(drv, ctx, s, done)
	}
}

// Driver waits in cuStreamSynchronize; done is not heeded.
func Driver(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, _ <-chan struct{}) error {
	return drv.StreamSynchronize(ctx, s)
}

// Poll waits by polling cuStreamQuery: without letting go of the
// goroutine's P for spin (a request's GPU work is often done within tens
// of microseconds, and a yield costs the waiter its P), then yielding
// between polls. Waiters past the spin then share the host's cores through
// Go's scheduler, which switches between them in microseconds, where a
// thread spinning in the driver is descheduled by the kernel for
// milliseconds once waiters outnumber cores (H200 host, 32 threads waiting
// for 40 µs kernels on 16 cores: P99 1.1 ms against 0.1 ms with 16
// threads; testdata/h200-syncwait.tsv at the module root).
func Poll(spin time.Duration) Wait {
	return func(drv cuda.Driver, ctx cuda.Context, s cuda.Stream, done <-chan struct{}) error {
		var start time.Time
		for i := 0; ; i++ {
			err := drv.StreamQuery(ctx, s)
			if err == nil || !errors.Is(err, cuda.ErrorNotReady) {
				return err
			}
			select {
			case <-done:
				return ErrEnded
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

// For is the wait a pool's WithHostWait chose: unset, Adaptive over half
// the cores Go may use (a container's CPU limit); inDriver, Driver; else
// Poll(spin).
func For(set, inDriver bool, spin time.Duration) Wait {
	switch {
	case !set:
		return Adaptive(int32(max(runtime.GOMAXPROCS(0)/2, 1)))
	case inDriver:
		return Driver
	}
	return Poll(spin)
}

// Within runs f and returns its error, or ctx.Err() if ctx ends first (or
// had ended); f then runs to its end on its own goroutine, so the one wait
// (f's) stays in f.
func Within(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	if ctx.Err() != nil {
		return ctx.Err() // started, not waited for
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Bounded runs wait bounded by ctx. An ended ctx runs nothing and returns
// its error; a ctx that never ends runs wait(nil) here. Otherwise a wait
// that its done channel cannot end (aside: the driver's, cuMemFree) runs
// aside as Within runs it, and one that it can is handed ctx.Done() and,
// ended by it, answers ctx.Err().
func Bounded(ctx context.Context, aside bool, wait func(done <-chan struct{}) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return wait(nil)
	}
	if aside {
		return Within(ctx, func() error { return wait(nil) })
	}
	if err := wait(ctx.Done()); err != ErrEnded {
		return err
	}
	return ctx.Err()
}
