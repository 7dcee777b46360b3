// Package hamibase is the benchmark baseline for memory accounting, built
// the way HAMi-core accounts memory: one lock (HAMi-core uses a
// process-shared semaphore) over a fixed array of slots, total usage
// recomputed by scanning every slot on each allocation, and allocation
// records kept under the same lock. It exists only to be measured against.
package hamibase

import "sync"

// Tracker is the baseline accountant.
type Tracker struct {
	mu     sync.Mutex
	limit  uint64
	slots  []slot
	allocs map[uint64]alloc
}

type slot struct {
	used, limit uint64
	inUse       bool
}

type alloc struct {
	slot int
	size uint64
}

// New makes a tracker with the given device limit and slots, each slot
// limited to the device limit.
func New(limit uint64, slots int) *Tracker {
	h := &Tracker{limit: limit, slots: make([]slot, slots), allocs: make(map[uint64]alloc)}
	for i := range h.slots {
		h.slots[i] = slot{limit: limit, inUse: true}
	}
	return h
}

// Slots is the number of slots.
func (h *Tracker) Slots() int { return len(h.slots) }

// Reserve admits n bytes for slot s, or reports false.
func (h *Tracker) Reserve(s int, n uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var total uint64
	for i := range h.slots { // O(N) scan on every allocation
		if h.slots[i].inUse {
			total += h.slots[i].used
		}
	}
	sl := &h.slots[s]
	if total+n > h.limit || sl.used+n > sl.limit {
		return false
	}
	sl.used += n
	return true
}

// Unreserve gives back n bytes a Reserve of slot s admitted, under the
// lock as HAMi-core's rollback is.
func (h *Tracker) Unreserve(s int, n uint64) {
	h.mu.Lock()
	h.slots[s].used -= min(n, h.slots[s].used)
	h.mu.Unlock()
}

// Record remembers an allocation for free attribution.
func (h *Tracker) Record(s int, ptr, n uint64) {
	h.mu.Lock()
	h.allocs[ptr] = alloc{s, n}
	h.mu.Unlock()
}

// Release frees a recorded allocation of slot s.
func (h *Tracker) Release(s int, ptr uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.allocs[ptr]
	if !ok || a.slot != s {
		return false
	}
	delete(h.allocs, ptr)
	h.slots[s].used -= a.size
	return true
}

// Cycle is one allocation's accounting lifecycle: admit, record, free.
func (h *Tracker) Cycle(s int, ptr, n uint64) bool {
	if !h.Reserve(s, n) {
		return false
	}
	h.Record(s, ptr, n)
	return h.Release(s, ptr)
}
