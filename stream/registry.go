package stream

import (
	"sync"
	"sync/atomic"
)

// Registry labels raw stream handles created outside the SDK, such as the
// stream an NCCL communicator runs its collectives on. Lookups are lock-free
// reads of an immutable map; registrations copy the map, which is fine since
// they happen once per communicator, not per launch.
type Registry struct {
	mu sync.Mutex // serialises writers only
	m  atomic.Pointer[map[uintptr]Class]
}

// Register labels handle with class c, replacing any earlier label.
func (r *Registry) Register(handle uintptr, c Class) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.m.Load()
	next := make(map[uintptr]Class, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[handle] = c
	r.m.Store(&next)
}

// Unregister forgets handle (call it when the stream is destroyed: handles are
// reused by the driver).
func (r *Registry) Unregister(handle uintptr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.m.Load()
	if old == nil {
		return
	}
	if _, ok := (*old)[handle]; !ok {
		return
	}
	next := make(map[uintptr]Class, len(*old))
	for k, v := range *old {
		if k != handle {
			next[k] = v
		}
	}
	r.m.Store(&next)
}

// Lookup returns the class of handle, or Default and false if it was never
// registered.
func (r *Registry) Lookup(handle uintptr) (Class, bool) {
	m := r.m.Load()
	if m == nil {
		return Default, false
	}
	c, ok := (*m)[handle]
	return c, ok
}

func lenOf(m *map[uintptr]Class) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
