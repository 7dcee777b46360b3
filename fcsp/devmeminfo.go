package fcsp

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// memInfoMaxAge is how old the device's free-memory figure that
// MemGetInfo reports may be. cuMemGetInfo asks the kernel driver (about
// 100 µs of a host core on the H200 host: 16 goroutines a class asking
// every 100 µs kept 13 cores busy); a server that sizes work from the
// figure at request rate needs it cheap far more than it needs it exact
// to the microsecond, and the tenant's own part of it (its quota and
// what it holds) is exact at every call.
const memInfoMaxAge = time.Millisecond

// devMemInfo caches the device's free and total memory for the pool: one
// caller refreshes it when it is older than memInfoMaxAge, the others
// read the last figure meanwhile.
type devMemInfo struct {
	at          atomic.Int64 // monotonic ns of the reading; 0: none yet
	free, total atomic.Uint64
	mu          sync.Mutex // one refresh at a time
}

// memInfo is the device's free and total memory, at most memInfoMaxAge
// old; a reading is made with ctx.
func (p *Pool) memInfo(ctx cuda.Context) (free, total uint64, err error) {
	m := &p.devMem
	now := nanotime()
	if at := m.at.Load(); at != 0 && now-at < int64(memInfoMaxAge) {
		return m.free.Load(), m.total.Load(), nil
	}
	if !m.mu.TryLock() {
		if m.at.Load() != 0 { // another caller is refreshing: the last figure will do
			return m.free.Load(), m.total.Load(), nil
		}
		m.mu.Lock() // the first reading: wait for it
	}
	defer m.mu.Unlock()
	if at := m.at.Load(); at != 0 && nanotime()-at < int64(memInfoMaxAge) {
		return m.free.Load(), m.total.Load(), nil
	}
	if free, total, err = p.drv.MemGetInfo(ctx); err != nil {
		return 0, 0, err
	}
	m.free.Store(free)
	m.total.Store(total)
	m.at.Store(nanotime())
	return free, total, nil
}

// nanotime is a monotonic clock reading in ns.
func nanotime() int64 { return int64(time.Since(clockBase)) }

var clockBase = time.Now()

// cachedBytes is the size of the blocks on the tenant's streams' free
// lists (Stats.MemoryCached), without the rest of Stats.
func (c *tenantCore) cachedBytes() (n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.streams {
		n += s.blocks.Bytes()
	}
	return n
}
