package greenctx

import (
	"context"
	"sync"
	"sync/atomic"
)

// threadMutex is the partition's exclusion. It is a sync.Mutex that one OS
// thread can also hold for a while through Hold (a caller that runs foreign
// code, such as cuBLAS, with the green context current on that thread). While
// a thread holds it, Lock on that same thread nests instead of deadlocking:
// the SDK's own calls made from inside the held section (an allocation, a
// stream) run, since the exclusion is already theirs. Lock on any other
// thread waits as before.
type threadMutex struct {
	mu     sync.Mutex
	holder atomic.Int64 // OS thread id of the Hold holder; 0 when none
	depth  int          // nested Lock/Hold on the holder's thread; only the holder touches it
}

// Lock takes the mutex, or nests on the holder's thread.
func (m *threadMutex) Lock() {
	if m.mu.TryLock() {
		return
	}
	if m.nest(threadID()) {
		return
	}
	m.mu.Lock()
}

// TryLock is sync.Mutex.TryLock (no nesting: the callers that use it
// decide for themselves what to do when the partition is busy).
func (m *threadMutex) TryLock() bool { return m.mu.TryLock() }

// Unlock undoes one Lock.
func (m *threadMutex) Unlock() {
	if m.depth > 0 {
		m.depth--
		return
	}
	m.mu.Unlock()
}

// nest reports whether thread holds the mutex through Hold, and if so
// counts one more nested acquisition. holder is written only by the holder
// itself, so a thread that reads its own id there is the holder.
func (m *threadMutex) nest(thread int) bool {
	if thread == 0 || m.holder.Load() != int64(thread) {
		return false
	}
	m.depth++
	return true
}

// lockContext takes the mutex, waiting no longer than ctx. sync.Mutex has no
// cancellable wait, so a contended wait is handed to a goroutine that takes
// the mutex and passes it over, or gives it back if the waiter left.
func (m *threadMutex) lockContext(ctx context.Context) error {
	if m.mu.TryLock() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		m.mu.Lock()
		return nil
	}
	got, gone := make(chan struct{}), make(chan struct{})
	go func() {
		m.mu.Lock()
		select {
		case got <- struct{}{}:
		case <-gone:
			m.mu.Unlock()
		}
	}()
	select {
	case <-got:
		return nil
	case <-ctx.Done():
		close(gone)
		return ctx.Err()
	}
}

// Hold takes the partition's exclusion for the calling OS thread, waiting
// no longer than ctx, so that the caller may make the green context current
// on that thread (the driver allows it on one thread at a time and does no
// locking of its own). thread is the caller's OS thread id (unix.Gettid),
// and the caller must stay locked to that thread (runtime.LockOSThread)
// until Release. While held, this partition's calls made on the same
// thread (Do, NewStream, DestroyStream, and a nested Hold) run without
// waiting; on other threads they wait for Release. ErrClosed if the
// partition is closed.
func (p *Partition) Hold(ctx context.Context, thread int) error {
	if thread == 0 {
		thread = threadID()
	}
	if p.mu.nest(thread) {
		if p.closed {
			p.mu.depth--
			return ErrClosed
		}
		return nil
	}
	if err := p.mu.lockContext(ctx); err != nil {
		return err
	}
	if p.closed {
		p.mu.mu.Unlock()
		return ErrClosed
	}
	p.mu.holder.Store(int64(thread))
	return nil
}

// Release gives back one Hold, on the thread that took it.
func (p *Partition) Release() {
	if p.mu.depth > 0 {
		p.mu.depth--
		return
	}
	p.mu.holder.Store(0)
	p.mu.mu.Unlock()
}

// HeldHere reports whether the calling OS thread holds the partition
// through Hold.
func (p *Partition) HeldHere(thread int) bool {
	return thread != 0 && p.mu.holder.Load() == int64(thread)
}
