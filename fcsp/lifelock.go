package fcsp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// lifeLock lets calls on a tenant run concurrently while it lives and lets
// Close wait for those in flight, like the read side of a sync.RWMutex but
// without one shared counter: each call counts itself in one of several
// padded slots, picked at random. On the H200, with 16 goroutines
// allocating from one tenant's free lists, the RWMutex's reader count was
// the hottest cache line in the profile (a third of the CPU time).
//
// Go's atomics are sequentially consistent, so a call that counts itself
// and then sees no end, and an end that is set and then sees every slot at
// zero, cannot both happen: either the call backs out or end waits for it.
//
// The slots (4 KiB) are the lock's while it lives: end gives them to the
// next tenant's lock, since a server that makes and closes tenants at a
// high rate would otherwise collect 4 KiB of garbage per tenant. A call
// that loaded them just before end handed them on only counts itself in
// and out again, having seen end begin: an addition and its undo, so the
// next owner's count is never below its own calls in flight.
type lifeLock struct {
	ending atomic.Bool
	gate   pauseGate                     // Tenant.Reshape holds calls back while it switches (reshape.go)
	slots  atomic.Pointer[lifeSlotArray] // made on first need; nil again once ended
}

type lifeSlotArray [lifeSlots]struct {
	n atomic.Int64
	_ [120]byte // a slot per 128 bytes: adjacent-line prefetch pairs lines
}

const lifeSlots = 32

// lifeSlotArrays are ended locks' slots, every count back at zero.
var lifeSlotArrays = sync.Pool{New: func() any { return new(lifeSlotArray) }}

// array is the lock's slots, taken from lifeSlotArrays on first need; nil
// once end has given them back.
func (l *lifeLock) array() *lifeSlotArray {
	if a := l.slots.Load(); a != nil || l.ending.Load() {
		return a
	}
	a := lifeSlotArrays.Get().(*lifeSlotArray)
	if !l.slots.CompareAndSwap(nil, a) {
		lifeSlotArrays.Put(a)
	}
	return l.slots.Load()
}

// enter counts a call in; ok is false once end has begun. A call that got
// ok passes its slot to exit. While a reshape holds new calls back, those
// for which pass says yes go through all the same: the calls a Do in flight
// makes on its own thread, which the reshape is waiting for.
func (l *lifeLock) enter(pass func() bool) (slot uint32, ok bool) {
	for {
		a := l.array()
		if a == nil {
			return 0, false // ended
		}
		slot = rand.Uint32() % lifeSlots
		a[slot].n.Add(1)
		if l.ending.Load() {
			a[slot].n.Add(-1)
			return 0, false
		}
		if !l.gate.held.Load() || pass() {
			return slot, true
		}
		// A reshape is draining the calls in flight: back out, wait for it.
		a[slot].n.Add(-1)
		l.gate.wait()
	}
}

// exit counts a call out; its slots stay the lock's until it has left.
func (l *lifeLock) exit(slot uint32) { l.slots.Load()[slot].n.Add(-1) }

// end refuses new calls and waits for those in flight, which may be long
// (a stream synchronisation), so it yields, then sleeps, between looks;
// then it gives the slots on.
func (l *lifeLock) end() {
	l.ending.Store(true)
	l.gate.wait() // a reshape under way finishes first
	l.drain(context.Background())
	if a := l.slots.Swap(nil); a != nil {
		lifeSlotArrays.Put(a)
	}
}

// drain waits until no call is counted in, or ctx ends (false).
func (l *lifeLock) drain(ctx context.Context) bool {
	a := l.slots.Load()
	if a == nil {
		return true // never entered, or ended
	}
	for i := range a {
		for spins := 0; a[i].n.Load() != 0; spins++ {
			if spins < 100 {
				runtime.Gosched()
			} else if ctx.Err() != nil {
				return false
			} else {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	return true
}

// enter admits a call while the tenant lives; ErrClosed once Close began.
// The caller passes the slot to c.life.exit when done.
func (c *tenantCore) enter() (uint32, error) {
	slot, ok := c.life.enter(c.insideDoHere)
	if !ok {
		if lost := c.pool.fault.err(); lost != nil && !c.closed.Load() {
			return 0, fmt.Errorf("tenant %q: %w", c.name, lost) // a Reset is under way
		}
		return 0, ErrClosed
	}
	if c.closed.Load() {
		c.life.exit(slot)
		return 0, ErrClosed
	}
	if lost := c.pool.fault.err(); lost != nil {
		c.life.exit(slot)
		return 0, fmt.Errorf("tenant %q: %w", c.name, lost)
	}
	return slot, nil
}

// insideDoHere reports whether the caller runs inside one of the tenant's
// Dos (or Captures) on its thread: the slow path of enter, while a reshape
// waits. Pinned for the look, as checkNotInsideDo is.
func (c *tenantCore) insideDoHere() bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return c.dos.here()
}
