// Package inside names the OS threads inside a tenant's Do (or Capture, or
// OnClose functions), so that a call made from one of them that would wait
// for that Do (Close, Shutdown, Reshape) can be refused instead of waiting
// for itself, and so that a Current kept after its Do can tell it is stale.
package inside

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
)

// Threads names the OS threads inside a tenant's Dos.
//
// Do is the hot path and Close the rare one, so a Do claims a slot of its
// own (a compare-and-swap from 0 to its thread's id, starting at the slot
// the id hashes to) and Close reads them all. Slots are padded apart:
// concurrent Dos of an unpartitioned tenant write different lines. Only
// when every slot is taken does a Do count itself in the map under mu.
//
// A slot holding the calling thread's id can only have been written by
// that thread (the one goroutine locked to it, inside Do) and is cleared
// by it before its Do returns: so Close finds its own id exactly when it
// runs inside a Do on its own thread.
//
// The slots (4 KiB) are made by the first Enter: a server makes and closes
// tenants that never call Do, and each would otherwise carry them. The
// zero Threads is ready for use.
type Threads struct {
	slots atomic.Pointer[slotArray]
	over  atomic.Int32 // Dos counted in n
	mu    sync.Mutex
	n     map[int]int // thread -> Dos counted there when no slot was free
}

type slotArray [Slots]struct {
	thread atomic.Int64
	_      [56]byte
}

// Slots is how many Dos a Threads counts without its lock; those past it
// are counted in a map.
const Slots = 64

// Enter counts a Do on thread, the caller's (locked to it), in and returns
// its slot, or -1 for the map. The caller passes both to Exit.
func (d *Threads) Enter(thread int) int {
	slots := d.slots.Load()
	if slots == nil {
		d.slots.CompareAndSwap(nil, new(slotArray))
		slots = d.slots.Load()
	}
	h := uint(thread) % Slots
	for i := range uint(Slots) {
		k := (h + i) % Slots
		s := &slots[k].thread
		if s.Load() == 0 && s.CompareAndSwap(0, int64(thread)) {
			return int(k)
		}
	}
	d.mu.Lock()
	if d.n == nil {
		d.n = map[int]int{}
	}
	d.n[thread]++
	d.over.Add(1)
	d.mu.Unlock()
	return -1
}

// Exit undoes Enter.
func (d *Threads) Exit(slot, thread int) {
	if slot >= 0 {
		d.slots.Load()[slot].thread.Store(0)
		return
	}
	d.mu.Lock()
	if d.n[thread]--; d.n[thread] == 0 {
		delete(d.n, thread)
	}
	d.over.Add(-1)
	d.mu.Unlock()
}

// Here reports whether the calling thread is inside a Do. A goroutine not
// locked to its thread can be here only if a Do on this thread is running,
// which then is its own (a locked thread runs no other goroutine); but it
// must stay on the thread while it looks: see Pinned.
func (d *Threads) Here() bool {
	thread := osthread.ID()
	if TestHookHere != nil {
		TestHookHere() // between the look at the thread and the scan
	}
	return d.Has(thread)
}

// Has reports whether a Do is running on thread.
func (d *Threads) Has(thread int) bool {
	if slots := d.slots.Load(); slots != nil {
		for i := range slots {
			if slots[i].thread.Load() == int64(thread) {
				return true
			}
		}
	}
	if d.over.Load() == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[thread] > 0
}

// Pinned is Here with the calling goroutine locked to its thread for the
// look: a goroutine that moved threads between reading its thread's id and
// scanning could find a Do that started on the thread it left, and take
// itself for one inside that Do.
func (d *Threads) Pinned() bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return d.Here()
}

// NotInside is called by what would wait for the tenant's Dos to end
// (Close, Shutdown, Reshape; the pool's Close and Shutdown) before it
// begins: from inside one it would wait for itself, and it is refused
// with ErrOwnDo. Pinned for the look (Pinned says why). The error is
// bare: the caller names the call.
func (d *Threads) NotInside() error {
	if d.Pinned() {
		return ErrOwnDo
	}
	return nil
}

// ErrOwnDo is NotInside's error.
var ErrOwnDo = fmt.Errorf("%w (the tenant's own); call it after Do returns", errs.ErrInsideDo)

// Live reports whether the Do that Enter gave slot on thread is still
// running (one atomic load where it had a slot).
func (d *Threads) Live(slot, thread int) bool {
	if slot >= 0 {
		return d.slots.Load()[slot].thread.Load() == int64(thread) // written by that Do
	}
	return d.Here()
}

// Over is how many Dos are counted in the map, past the slots.
func (d *Threads) Over() int { return int(d.over.Load()) }

// Count is how many Dos are counted in now, slots and map: a sample read
// without stopping them (a controller's, not a barrier).
func (d *Threads) Count() int {
	n := int(d.over.Load())
	if slots := d.slots.Load(); slots != nil {
		for i := range slots {
			if slots[i].thread.Load() != 0 {
				n++
			}
		}
	}
	return n
}

// Idle reports whether no Do is counted in, slot or map.
func (d *Threads) Idle() bool {
	if slots := d.slots.Load(); slots != nil {
		for i := range slots {
			if slots[i].thread.Load() != 0 {
				return false
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.over.Load() == 0 && len(d.n) == 0
}

// TestHookHere, set by a test only, runs inside Here between reading the
// thread's id and scanning the slots.
var TestHookHere func()
