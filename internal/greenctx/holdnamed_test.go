package greenctx

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TryHoldUnnamed takes a free exclusion only; once named, the holder's
// thread nests (Hold, Lock) and other threads wait; Release frees it; a
// closed partition refuses.
func TestTryHoldUnnamedThenNamed(t *testing.T) {
	var p Partition
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me := threadID()
	if ok, err := p.TryHoldUnnamed(); !ok || err != nil {
		t.Fatalf("TryHoldUnnamed of a free partition: %v %v", ok, err)
	}
	if p.HeldHere(me) {
		t.Fatal("held here before NameHolder")
	}
	if ok, err := p.TryHoldUnnamed(); ok || err != nil {
		t.Fatalf("TryHoldUnnamed of a held partition: %v %v, want false, nil", ok, err)
	}
	p.NameHolder(me)
	if !p.HeldHere(me) {
		t.Fatal("not held here after NameHolder")
	}
	// The holder's thread nests.
	if err := p.Hold(context.Background(), me); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.mu.Unlock()
	p.Release()
	// Another thread waits until Release.
	got := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		p.mu.Lock()
		close(got)
		p.mu.Unlock()
	}()
	select {
	case <-got:
		t.Fatal("another thread took the exclusion while it was held")
	case <-time.After(2 * time.Millisecond):
	}
	p.Release()
	<-got
	if p.HeldHere(me) {
		t.Fatal("held here after Release")
	}
	p.closed = true
	if ok, err := p.TryHoldUnnamed(); ok || err != ErrClosed {
		t.Fatalf("TryHoldUnnamed of a closed partition: %v %v, want false, ErrClosed", ok, err)
	}
	if !p.mu.TryLock() {
		t.Fatal("a refused TryHoldUnnamed kept the mutex")
	}
}
