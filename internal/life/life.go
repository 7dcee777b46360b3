// Package life is the lock that counts a tenant's calls in flight: calls
// run concurrently while the tenant lives, Close waits for those in flight
// (End), and Tenant.Reshape holds new calls back while it switches streams
// (Pause, Resume). What a refusal means to the caller (closed, or the device
// lost) is the tenant's to say.
package life

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Lock lets calls on a tenant run concurrently while it lives and lets
// Close wait for those in flight, like the read side of a sync.RWMutex but
// without one shared counter: each call counts itself in one of several
// padded slots, picked at random. On the H200, with 16 goroutines
// allocating from one tenant's free lists, the RWMutex's reader count was
// the hottest cache line in the profile (a third of the CPU time).
//
// Go's atomics are sequentially consistent, so a call that counts itself
// and then sees no end, and an end that is set and then sees every slot at
// zero, cannot both happen: either the call backs out or End waits for it.
//
// The slots (4 KiB) are the lock's while it lives: End gives them to the
// next tenant's lock, since a server that makes and closes tenants at a
// high rate would otherwise collect 4 KiB of garbage per tenant. A call
// that loaded them just before End handed them on only counts itself in
// and out again, having seen End begin: an addition and its undo, so the
// next owner's count is never below its own calls in flight.
//
// The zero Lock is ready for use.
type Lock struct {
	ending atomic.Bool
	gate   pauseGate                 // Tenant.Reshape holds calls back while it switches
	slots  atomic.Pointer[slotArray] // made on first need; nil again once ended
}

type slotArray [nslots]struct {
	n atomic.Int64
	_ [120]byte // a slot per 128 bytes: adjacent-line prefetch pairs lines
}

const nslots = 32

// slotArrays are ended locks' slots, every count back at zero.
var slotArrays = sync.Pool{New: func() any { return new(slotArray) }}

// array is the lock's slots, taken from slotArrays on first need; nil
// once End has given them back.
func (l *Lock) array() *slotArray {
	if a := l.slots.Load(); a != nil || l.ending.Load() {
		return a
	}
	a := slotArrays.Get().(*slotArray)
	if !l.slots.CompareAndSwap(nil, a) {
		slotArrays.Put(a)
	}
	return l.slots.Load()
}

// Enter counts a call in; ok is false once End has begun. A call that got
// ok passes its slot to Exit. While a reshape holds new calls back, those
// for which pass says yes go through all the same: the calls a Do in flight
// makes on its own thread, which the reshape is waiting for.
func (l *Lock) Enter(pass func() bool) (slot uint32, ok bool) {
	for {
		a := l.array()
		if a == nil {
			return 0, false // ended
		}
		slot = rand.Uint32() % nslots
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

// Exit counts a call out; its slots stay the lock's until it has left.
func (l *Lock) Exit(slot uint32) { l.slots.Load()[slot].n.Add(-1) }

// End refuses new calls and waits for those in flight, which may be long
// (a stream synchronisation), so it yields, then sleeps, between looks;
// then it gives the slots on.
func (l *Lock) End() {
	l.ending.Store(true)
	l.gate.wait() // a reshape under way finishes first
	l.Drain(context.Background())
	if a := l.slots.Swap(nil); a != nil {
		slotArrays.Put(a)
	}
}

// Drain waits until no call is counted in, or ctx ends (false).
func (l *Lock) Drain(ctx context.Context) bool {
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

// pauseGate lets Tenant.Reshape hold a tenant's new calls back while it
// drains those in flight and switches streams, so that no call queues work
// on a stream handle that is being replaced. The calls' fast path reads one
// atomic bool.
type pauseGate struct {
	held atomic.Bool
	mu   sync.Mutex
	cond *sync.Cond
}

// wait blocks while the gate is held.
func (g *pauseGate) wait() {
	if !g.held.Load() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.held.Load() {
		g.cond.Wait()
	}
}

// Pause holds new calls back and waits for those in flight. It returns
// errs.ErrClosed, holding nothing, once End has begun, and ctx's error,
// holding nothing, if ctx ends first. Pauses are serialised by the caller.
func (l *Lock) Pause(ctx context.Context) error {
	g := &l.gate
	g.mu.Lock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	g.held.Store(true)
	g.mu.Unlock()
	if l.ending.Load() {
		l.Resume()
		return errs.ErrClosed
	}
	if !l.Drain(ctx) {
		l.Resume()
		return ctx.Err()
	}
	return nil
}

// Paused reports whether a Pause holds new calls back now.
func (l *Lock) Paused() bool { return l.gate.held.Load() }

// Resume lets the held calls in.
func (l *Lock) Resume() {
	g := &l.gate
	g.mu.Lock()
	g.held.Store(false)
	g.cond.Broadcast()
	g.mu.Unlock()
}

// InFlight is how many calls are counted in now: a sum of the slots, read
// without stopping them (a controller's sample, not a barrier).
func (l *Lock) InFlight() int {
	a := l.slots.Load()
	if a == nil {
		return 0
	}
	n := int64(0)
	for i := range a {
		n += a[i].n.Load()
	}
	return int(max(n, 0))
}
