package greenctx

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// The thread that holds the mutex through a hold nests its Locks; other
// threads wait; a waiter whose ctx ends leaves at once and the mutex stays
// usable.
func TestThreadMutexNestsOnTheHolderOnly(t *testing.T) {
	var m threadMutex
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := m.lockContext(context.Background()); err != nil {
			t.Error(err)
			return
		}
		m.holder.Store(int64(threadID()))
		m.Lock() // nested: would deadlock on a plain sync.Mutex
		m.Unlock()
		close(held)
		<-release
		m.holder.Store(0)
		m.Unlock()
	}()
	<-held
	var got atomic.Bool
	locked := make(chan struct{})
	go func() {
		m.Lock() // another thread: waits
		got.Store(true)
		m.Unlock()
		close(locked)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
	defer cancel()
	if err := m.lockContext(ctx); err != context.DeadlineExceeded {
		t.Fatalf("lockContext while held: %v, want DeadlineExceeded", err)
	}
	if got.Load() {
		t.Fatal("another thread's Lock went through while held")
	}
	close(release)
	<-done
	<-locked
	if err := m.lockContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.Unlock()
	if m.depth != 0 {
		t.Fatalf("depth %d after all unlocks", m.depth)
	}
}
