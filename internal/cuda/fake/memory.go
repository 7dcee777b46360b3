package fake

import (
	"sync"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Memory is the fake device memory: a bump allocator of addresses with
// backing bytes made on first touch, so that allocating gigabytes that are
// never written costs nothing.
type Memory struct {
	// Guarded by Driver.mu: the counts and the next address.
	total, used uint64
	next        cuda.DevicePtr

	// mu guards the maps: kernels run outside Driver.mu (queue.go) and
	// look their memory up here while other calls allocate and free. The
	// bytes themselves are not guarded, as on a GPU: work that races on
	// them is the caller's race.
	mu     sync.Mutex
	allocs map[cuda.DevicePtr][]byte
	sizes  map[cuda.DevicePtr]uint64
	placed map[cuda.DevicePtr]bool // pool blocks: addressable, counted by their pool
}

func (m *Memory) alloc(n uint64) (cuda.DevicePtr, bool) {
	if n > m.total-m.used {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sizes == nil {
		m.sizes = map[cuda.DevicePtr]uint64{}
	}
	p := m.next
	m.next += cuda.DevicePtr((n + 511) &^ 511) // the driver aligns to 512 bytes at least
	m.used += n
	m.sizes[p] = n
	return p, true
}

// reserve sets aside n bytes of addresses (a pool's range) without taking
// device memory; the pool counts what it maps in used itself.
func (m *Memory) reserve(n uint64) cuda.DevicePtr {
	p := m.next
	m.next += cuda.DevicePtr((n + 511) &^ 511)
	return p
}

// place makes n bytes at p (a block inside a reserved range) addressable by
// kernels and copies, without counting them.
func (m *Memory) place(p cuda.DevicePtr, n uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sizes == nil {
		m.sizes = map[cuda.DevicePtr]uint64{}
	}
	if m.placed == nil {
		m.placed = map[cuda.DevicePtr]bool{}
	}
	m.sizes[p], m.placed[p] = n, true
}

func (m *Memory) unplace(p cuda.DevicePtr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sizes, p)
	delete(m.allocs, p)
	delete(m.placed, p)
}

// plain says p is a live plain allocation (cuMemAlloc's).
func (m *Memory) plain(p cuda.DevicePtr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.sizes[p]
	return ok && !m.placed[p]
}

func (m *Memory) free(p cuda.DevicePtr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.freeLocked(p)
}

func (m *Memory) freeLocked(p cuda.DevicePtr) bool {
	if m.placed[p] {
		return false // a pool's block: freed through its pool
	}
	n, ok := m.sizes[p]
	if !ok {
		return false
	}
	delete(m.sizes, p)
	delete(m.allocs, p)
	m.used -= n
	return true
}

// Slice returns n bytes of device memory at p, which may lie inside an
// allocation; ok is false if they do not lie inside one.
func (m *Memory) Slice(p cuda.DevicePtr, n uint64) ([]byte, bool) { return m.slice(p, n) }

func (m *Memory) slice(p cuda.DevicePtr, n uint64) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for base, size := range m.sizes {
		if p >= base && uint64(p-base)+n <= size {
			b := m.allocs[base]
			if b == nil {
				b = make([]byte, size)
				m.allocs[base] = b
			}
			off := uint64(p - base)
			return b[off : off+n], true
		}
	}
	return nil, false
}

// freeUnplaced frees every plain allocation (a reset's).
func (m *Memory) freeUnplaced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.sizes {
		if !m.placed[p] {
			m.freeLocked(p)
		}
	}
}
