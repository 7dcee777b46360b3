package devmem

import (
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// A pooled engine's allocations go through per-stream free lists in front
// of the driver's pool. On the H200 one cuMemPool serialises its callers:
// 16 goroutines got 157k alloc+free pairs a second out of it against 555k
// for one goroutine, and their P99 stayed near 1 ms. A block freed on a
// stream is kept on that stream's list for the next allocation of the same
// size class on the same stream; stream order makes the reuse safe (work
// queued after the allocation runs after the work queued before the free)
// without an event or a driver call. Blocks never move between streams
// through the lists: a block freed on one stream reaches another only
// through the driver's pool, which orders it.
//
// Sizes are rounded up to classes (eight per doubling, so at most 1/8 more
// than asked is taken from the pool) so that any block of a class serves
// any request of that class. Larger requests than maxCachedSize go straight
// to the driver's pool.

const (
	minClassShift  = 9 // the smallest class: 512 bytes
	stepsShift     = 3 // 8 classes per doubling
	maxCachedShift = 30
	maxCachedSize  = 1 << maxCachedShift
	numClasses     = 1 + (maxCachedShift-minClassShift)<<stepsShift
)

// sizeClass is the class of an n-byte request and the size of its blocks;
// ok is false when n is too large to be cached.
func sizeClass(n uint64) (class int, size uint64, ok bool) {
	if n > maxCachedSize {
		return 0, n, false
	}
	if n <= 1<<minClassShift {
		return 0, 1 << minClassShift, true
	}
	e := bits.Len64(n - 1) // 2^(e-1) < n <= 2^e
	step := uint64(1) << (e - 1 - stepsShift)
	size = (n + step - 1) &^ (step - 1)
	k := int(size>>(e-1-stepsShift)) - (1<<stepsShift + 1) // 0 .. 7
	return 1 + (e-1-minClassShift)<<stepsShift + k, size, true
}

// classSize is the block size of a class (the inverse of sizeClass).
func classSize(class int) uint64 {
	if class == 0 {
		return 1 << minClassShift
	}
	d, k := (class-1)>>stepsShift, (class-1)&(1<<stepsShift-1)
	step := uint64(1) << (d + minClassShift - stepsShift)
	return uint64(1<<stepsShift+1+k) * step
}

// Blocks is the engine's part of one stream: the blocks freed on it that
// the pooled engine keeps for the stream's next allocations. The stream
// holds it (it stays with the stream when a reshape swaps the stream's
// handle); its zero value is empty, and its lists are made on first use,
// so that a stream of a plain engine costs a pointer.
type Blocks struct {
	l atomic.Pointer[freeList]
	// freed: blocks were freed to the driver on the stream since the
	// engine last synchronised it. The driver gives a freed block's chunk
	// back only once a synchronisation of its stream has seen the free
	// (on the H200 neither a trim, nor a query, nor an event did).
	freed atomic.Bool
}

// Bytes is what the stream's free lists hold.
func (b *Blocks) Bytes() uint64 {
	if l := b.l.Load(); l != nil {
		return l.bytes()
	}
	return 0
}

func (b *Blocks) list() *freeList { return loadOrNew(&b.l) }

// freeList holds a stream's cached blocks by size class, in shards: many
// goroutines allocating on one stream would otherwise queue on one mutex
// per class (on the H200, 16 goroutines on one stream had a P99 of 160 us
// with one shard). Any shard serves any request: the blocks are all in
// order on the same stream. Each shard counts its bytes, so that no count
// is shared by every goroutine of a tenant.
type freeList struct {
	shards [listShards]atomic.Pointer[shard]
}

const listShards = 4

type shard struct {
	bytes atomic.Int64 // a share of the list's bytes; only the sum is exact
	_     [56]byte
	bins  [numClasses]bin
}

type bin struct {
	mu     sync.Mutex
	n      atomic.Int32 // len(blocks), read without the lock to skip empty bins
	blocks []cuda.DevicePtr
}

func (b *bin) pop() (cuda.DevicePtr, bool) {
	k := len(b.blocks)
	if k == 0 {
		return 0, false
	}
	p := b.blocks[k-1]
	b.blocks = b.blocks[:k-1]
	b.n.Store(int32(k - 1))
	return p, true
}

func (b *bin) push(p cuda.DevicePtr) {
	b.blocks = append(b.blocks, p)
	b.n.Store(int32(len(b.blocks)))
}

// take pops a block of the class from any shard: first from those whose
// bin is free now, then waiting for the busy ones.
func (l *freeList) take(class int) (cuda.DevicePtr, bool) {
	start := rand.Uint32()
	var busy [listShards]*shard
	for i := range uint32(listShards) {
		sh := l.shards[(start+i)%listShards].Load()
		if sh == nil || sh.bins[class].n.Load() == 0 {
			continue
		}
		b := &sh.bins[class]
		if !b.mu.TryLock() {
			busy[i] = sh
			continue
		}
		if p, ok := sh.pop(class); ok {
			return p, true
		}
	}
	for _, sh := range busy {
		if sh == nil {
			continue
		}
		sh.bins[class].mu.Lock()
		if p, ok := sh.pop(class); ok {
			return p, true
		}
	}
	return 0, false
}

// pop takes a block from the locked bin of the class and unlocks it.
func (sh *shard) pop(class int) (cuda.DevicePtr, bool) {
	b := &sh.bins[class]
	p, ok := b.pop()
	b.mu.Unlock()
	if ok {
		sh.bytes.Add(-int64(classSize(class)))
	}
	return p, ok
}

// room counts a block of the class in, unless the list would then hold
// more than keep bytes; push then keeps the block, on the shard room
// returned (nil: no room). Only the sum of the shards' counts means
// anything (a block may be counted in one shard and kept in another), so
// the bound is checked before any bin is locked. Counting first and
// checking after means two racing puts may both back out, never both stay
// over the bound.
func (l *freeList) room(class int, keep uint64) *shard {
	size := int64(classSize(class))
	counted := l.shard(rand.Uint32() % listShards)
	counted.bytes.Add(size)
	if l.bytes() > keep {
		counted.bytes.Add(-size)
		return nil
	}
	return counted
}

// push keeps a block room counted in counted: on a shard whose bin is free
// now, else on counted's, waiting for its bin.
func (l *freeList) push(counted *shard, class int, p cuda.DevicePtr) {
	start := rand.Uint32()
	for i := range uint32(listShards) {
		if b := &l.shard((start + i) % listShards).bins[class]; b.mu.TryLock() {
			b.push(p)
			b.mu.Unlock()
			return
		}
	}
	b := &counted.bins[class]
	b.mu.Lock()
	b.push(p)
	b.mu.Unlock()
}

func (l *freeList) shard(i uint32) *shard { return loadOrNew(&l.shards[i]) }

// loadOrNew is what p points to, made (once, whoever wins) on first use.
func loadOrNew[T any](p *atomic.Pointer[T]) *T {
	if v := p.Load(); v != nil {
		return v
	}
	p.CompareAndSwap(nil, new(T))
	return p.Load()
}

// bytes is what the list holds.
func (l *freeList) bytes() uint64 {
	var n int64
	for i := range l.shards {
		if sh := l.shards[i].Load(); sh != nil {
			n += sh.bytes.Load()
		}
	}
	return uint64(max(n, 0))
}

// drain empties the list and returns its blocks and their bytes.
func (l *freeList) drain() (ptrs []cuda.DevicePtr, freed uint64) {
	for i := range l.shards {
		sh := l.shards[i].Load()
		if sh == nil {
			continue
		}
		for class := range sh.bins {
			b := &sh.bins[class]
			if b.n.Load() == 0 {
				continue
			}
			b.mu.Lock()
			ptrs = append(ptrs, b.blocks...)
			sh.bytes.Add(-int64(classSize(class)) * int64(len(b.blocks)))
			freed += classSize(class) * uint64(len(b.blocks))
			b.blocks = b.blocks[:0]
			b.n.Store(0)
			b.mu.Unlock()
		}
	}
	return ptrs, freed
}
