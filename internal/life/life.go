// Package life is the lock that counts a tenant's calls in flight: calls
// run concurrently while the tenant lives, Close waits for those in flight
// (End), and Tenant.Reshape holds new calls back while it switches streams
// (Pause or PauseCalls, Resume). Waits for a stream (EnterWait) are counted
// apart: End waits for them, Pause too, PauseCalls neither waits for them
// nor holds them back. What a refusal means to the caller (closed, or the
// device lost) is the tenant's to say.
package life

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/spin"
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
	n [kinds]atomic.Int64 // calls, waits (EnterWait)
	_ [112]byte           // a slot per 128 bytes: adjacent-line prefetch pairs lines
}

// The kinds of entry counted apart: a pause holds back and waits for a
// kind k where its hold has bit 1<<k (HoldCalls, HoldWaits).
const (
	calls = iota
	waits
	kinds
)

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
func (l *Lock) Enter(pass func() bool) (slot uint32, ok bool) { return l.enter(calls, pass) }

// TryEnter is Enter for a call that must never wait at a pause's gate (a
// neighbour's trim: two tenants trimming each other while both pause
// would wait for each other): ok is false while a pause holds calls back,
// as once End has begun.
func (l *Lock) TryEnter() (slot uint32, ok bool) {
	gated := false
	slot, ok = l.enter(calls, func() bool { gated = true; return true })
	if ok && gated {
		l.Exit(slot) // through the gate for no more than this look
		return 0, false
	}
	return slot, ok
}

// Exit counts a call out; its slots stay the lock's until it has left.
func (l *Lock) Exit(slot uint32) { l.slots.Load()[slot].n[calls].Add(-1) }

// EnterWait is Enter for a wait on a stream's handle read after it: a
// PauseCalls neither holds it back nor waits for it (the caller's handles
// outlive a pause), a Pause does both, End waits for it. The caller passes
// the slot to ExitWait.
func (l *Lock) EnterWait(pass func() bool) (slot uint32, ok bool) { return l.enter(waits, pass) }

// ExitWait counts a wait out.
func (l *Lock) ExitWait(slot uint32) { l.slots.Load()[slot].n[waits].Add(-1) }

// enter counts an entry of kind k in (Enter, EnterWait).
func (l *Lock) enter(k int, pass func() bool) (slot uint32, ok bool) {
	hold := uint32(1) << k
	for {
		a := l.array()
		if a == nil {
			return 0, false // ended
		}
		slot = rand.Uint32() % nslots
		a[slot].n[k].Add(1)
		if l.ending.Load() {
			a[slot].n[k].Add(-1)
			return 0, false
		}
		if l.gate.held.Load()&hold == 0 || pass() || l.gate.passes() {
			return slot, true
		}
		// A move is draining what it holds back: back out, wait for it.
		a[slot].n[k].Add(-1)
		l.gate.wait(Hold(hold))
	}
}

// End refuses new calls and waits for those in flight, which may be long
// (a stream synchronisation), so it yields, then sleeps, between looks;
// then it gives the slots on.
func (l *Lock) End() {
	l.ending.Store(true)
	l.gate.wait(HoldCalls | HoldWaits) // a move under way finishes first
	l.drain(context.Background(), true)
	if a := l.slots.Swap(nil); a != nil {
		slotArrays.Put(a)
	}
}

// Refuse refuses new calls and waits from now on, as End does, without
// waiting for those in flight: a stalled tenant's may never end. Its
// slots stay its own (a call in flight still counts itself out).
func (l *Lock) Refuse() { l.ending.Store(true) }

// drain waits until no call (and, withWaits, no wait) is counted in, or
// ctx ends (false).
func (l *Lock) drain(ctx context.Context, withWaits bool) bool {
	a := l.slots.Load()
	if a == nil {
		return true // never entered, or ended
	}
	for i := range a {
		for spins := 0; a[i].n[calls].Load() != 0 || (withWaits && a[i].n[waits].Load() != 0); spins++ {
			if ctx.Err() != nil {
				return false
			}
			spin.Step(spins, 50*time.Microsecond)
		}
	}
	return true
}

// pauseGate lets Tenant.Reshape hold a tenant's new calls back while it
// drains those in flight and switches streams, so that no call queues work
// on a stream handle that is being replaced. The calls' fast path reads one
// atomic word: what it holds back (HoldCalls, HoldWaits).
type pauseGate struct {
	held   atomic.Uint32
	passer atomic.Pointer[Passer] // who may pass while held; set by Hold, before held
	mu     sync.Mutex
	cond   *sync.Cond
}

// A Passer says which calls may pass a held gate: those the holder waits
// for, which would otherwise wait for the holder (a call made from inside
// a Do the holder is draining, on another tenant whose gate it holds too).
type Passer interface{ Pass() bool }

// passes asks the holder's Passer, if it gave one.
func (g *pauseGate) passes() bool {
	p := g.passer.Load()
	return p != nil && (*p).Pass()
}

// Hold is what a pause holds back: calls, waits (EnterWait), or both.
type Hold uint32

// What a pause holds back.
const (
	HoldCalls Hold = 1 << calls
	HoldWaits Hold = 1 << waits
)

// wait blocks while the gate holds any of what.
func (g *pauseGate) wait(what Hold) {
	if g.held.Load()&uint32(what) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.held.Load()&uint32(what) != 0 {
		g.cond.Wait()
	}
}

// Pause holds new calls and waits back and waits for those in flight. It
// returns errs.ErrClosed, holding nothing, once End has begun, and ctx's
// error, holding nothing, if ctx ends first. Pauses are serialised by the
// caller.
func (l *Lock) Pause(ctx context.Context) error { return l.pause(ctx, HoldCalls|HoldWaits) }

// PauseCalls is Pause for calls alone: waits in flight go on, and new
// ones come in, for a switch that leaves every handle a wait may hold
// valid (a reshapable partition keeps its layouts' streams until it
// closes, and a wait on the old stream still covers what was queued
// before it).
func (l *Lock) PauseCalls(ctx context.Context) error { return l.pause(ctx, HoldCalls) }

func (l *Lock) pause(ctx context.Context, what Hold) error {
	if err := l.Hold(what, nil); err != nil {
		return err
	}
	if !l.drain(ctx, what&HoldWaits != 0) {
		l.Resume()
		return ctx.Err()
	}
	return nil
}

// Hold holds back the new entries of the kinds what, but those pass lets
// through (nil: none but the caller's own, Enter's pass), and returns at
// once: the caller waits for those in flight with Quiet, as a move of
// several tenants' SMs does, all of theirs at one time (internal/smmove).
// It returns errs.ErrClosed, holding nothing, once End has begun. The
// caller lets the gate go with Resume; holds are serialised by the caller.
func (l *Lock) Hold(what Hold, pass Passer) error {
	g := &l.gate
	g.mu.Lock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	if pass != nil {
		g.passer.Store(&pass)
	}
	g.held.Store(uint32(what))
	g.mu.Unlock()
	if l.ending.Load() {
		l.Resume()
		return errs.ErrClosed
	}
	return nil
}

// Quiet reports whether no entry of the kinds what is counted in now: one
// look at each slot, not a barrier (entries the gate lets pass may come
// in after).
func (l *Lock) Quiet(what Hold) bool {
	a := l.slots.Load()
	if a == nil {
		return true
	}
	for i := range a {
		if a[i].n[calls].Load() != 0 || what&HoldWaits != 0 && a[i].n[waits].Load() != 0 {
			return false
		}
	}
	return true
}

// Paused reports whether a pause holds new calls back now.
func (l *Lock) Paused() bool { return l.gate.held.Load() != 0 }

// Resume lets the held calls (and waits) in.
func (l *Lock) Resume() {
	g := &l.gate
	g.mu.Lock()
	g.held.Store(0)
	g.passer.Store(nil)
	g.cond.Broadcast()
	g.mu.Unlock()
}

// InFlight is how many calls and waits are counted in now: a sum of the
// slots, read without stopping them (a sample, not a barrier).
func (l *Lock) InFlight() int {
	a := l.slots.Load()
	if a == nil {
		return 0
	}
	n := int64(0)
	for i := range a {
		n += a[i].n[calls].Load() + a[i].n[waits].Load()
	}
	return int(max(n, 0))
}
