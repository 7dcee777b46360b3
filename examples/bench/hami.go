package main

import "sync"

// hamiTracker is the baseline for the quota rows, copied from
// memtrack/bench_test.go: memory accounted the way HAMi-core does it, with
// one lock (HAMi-core uses a process-shared semaphore) over a fixed array of
// slots, total usage recomputed by scanning every slot on each allocation,
// and allocation records kept under the same lock.
type hamiTracker struct {
	mu     sync.Mutex
	limit  uint64
	slots  []hamiSlot
	allocs map[uint64]hamiAlloc
}

type hamiSlot struct {
	used, limit uint64
	inUse       bool
}

type hamiAlloc struct {
	slot int
	size uint64
}

func newHami(limit uint64, slots int) *hamiTracker {
	h := &hamiTracker{limit: limit, slots: make([]hamiSlot, slots), allocs: make(map[uint64]hamiAlloc)}
	for i := range h.slots {
		h.slots[i] = hamiSlot{limit: limit, inUse: true}
	}
	return h
}

func (h *hamiTracker) reserve(slot int, n uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	var total uint64
	for i := range h.slots { // O(N) scan on every allocation
		if h.slots[i].inUse {
			total += h.slots[i].used
		}
	}
	s := &h.slots[slot]
	if total+n > h.limit || s.used+n > s.limit {
		return false
	}
	s.used += n
	return true
}

func (h *hamiTracker) record(slot int, ptr, n uint64) {
	h.mu.Lock()
	h.allocs[ptr] = hamiAlloc{slot, n}
	h.mu.Unlock()
}

func (h *hamiTracker) release(slot int, ptr uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.allocs[ptr]
	if !ok || a.slot != slot {
		return false
	}
	delete(h.allocs, ptr)
	h.slots[slot].used -= a.size
	return true
}

// cycle is one allocation's accounting lifecycle: admit, record, free.
func (h *hamiTracker) cycle(slot int, ptr uint64) bool {
	if !h.reserve(slot, cycleBytes) {
		return false
	}
	h.record(slot, ptr, cycleBytes)
	return h.release(slot, ptr)
}
