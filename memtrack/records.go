package memtrack

import (
	"math/bits"
	"sync/atomic"
)

// Record words pack an allocation's size and owning account into one
// 64-bit value so that a single compare-and-swap can check ownership and
// remove the record:
//
//	bits 63..16  size in bytes (at most maxRecordSize)
//	bits 15..0   owner account id (1..maxAccounts)
//
// Word 0 marks a free node; wordClaimed (owner 0, never a live word) marks a
// node being rewritten by an insert.
const (
	ownerBits     = 16
	ownerMask     = 1<<ownerBits - 1
	maxAccounts   = ownerMask              // ids 1..65535
	maxRecordSize = 1<<(64-ownerBits) - 1  // 256 TiB
	wordClaimed   = uint64(1) << ownerBits // size 1, owner 0
	numBuckets    = 4096                   // power of two (spanBucket takes 12 bits)
	bucketMask    = numBuckets - 1
)

func packWord(size uint64, owner uint16) uint64 { return size<<ownerBits | uint64(owner) }
func wordLive(w uint64) bool                    { return w&ownerMask != 0 }
func wordOwner(w uint64) uint16                 { return uint16(w & ownerMask) }
func wordSize(w uint64) uint64                  { return w >> ownerBits }

// node is one slot of a bucket's list. Nodes are pushed at the head and are
// never unlinked; a freed node (word 0) is reused by the next insert into
// its bucket. Memory is therefore bounded by the peak number of live
// records per bucket.
//
// ABA: the only pointer CAS is the head push. Because nodes are never
// removed from a list and the Go garbage collector never reuses the memory
// of a node some goroutine still references, a head pointer observed by a
// pusher cannot be freed and re-pushed behind its back, so the classic ABA
// problem of lock-free lists does not arise. Reuse of a node for a new key is
// protected by the word state machine (0 → wordClaimed → live → 0), see
// recordMap.remove for why a stale reader cannot remove the wrong record.
type node struct {
	key  atomic.Uint64 // device pointer; only meaningful while word is live
	word atomic.Uint64
	next *node // immutable after publication
}

// recordMap is a fixed-size, lock-free hash map from device pointer to
// packed record word. All operations are O(1 + records in the bucket).
type recordMap struct {
	buckets [numBuckets]atomic.Pointer[node]
}

// bucketOf hashes the 8 bytes of ptr with FNV-1a. Device pointers are
// aligned (low bits zero) and clustered, so a plain mask would use a tiny
// fraction of the buckets.
func bucketOf(ptr uint64) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < 8; i++ {
		h ^= ptr & 0xff
		h *= prime64
		ptr >>= 8
	}
	return h & bucketMask
}

// insert records ptr with word w. It reports false if ptr is already live
// (a best-effort check: two racing inserts of one pointer are a caller bug
// the driver never causes).
func (m *recordMap) insert(ptr, w uint64) bool { return m.insertAt(bucketOf(ptr), ptr, w) }

// insertAt is insert into bucket i (spans choose theirs).
func (m *recordMap) insertAt(i, ptr, w uint64) bool {
	b := &m.buckets[i]
	head := b.Load()
	var free *node
	for n := head; n != nil; n = n.next {
		cw := n.word.Load()
		if cw == 0 {
			if free == nil {
				free = n
			}
			continue
		}
		if wordLive(cw) && n.key.Load() == ptr {
			return false
		}
	}
	// Reuse a free node if we can claim it; another insert may win it.
	if free != nil && free.word.CompareAndSwap(0, wordClaimed) {
		free.key.Store(ptr)
		free.word.Store(w) // publishes key
		return true
	}
	n := &node{}
	n.key.Store(ptr)
	n.word.Store(w)
	for {
		n.next = head
		if b.CompareAndSwap(head, n) {
			return true
		}
		head = b.Load()
	}
}

// remove deletes the live record of ptr owned by owner and returns its
// word. It reports false, changing nothing, if there is none.
//
// A reader may load a live word w, see the node freed and reused, and then
// load the new key. Its CAS(w → 0) can then only succeed if the node holds
// exactly w again, i.e. the same size and owner, and the key just loaded is
// ptr: that is a live record of (ptr, size, owner), precisely what the
// caller asked to remove, so the stale read is harmless.
func (m *recordMap) remove(ptr uint64, owner uint16) (uint64, bool) {
	b := &m.buckets[bucketOf(ptr)]
retry:
	for n := b.Load(); n != nil; n = n.next {
		w := n.word.Load()
		if !wordLive(w) || n.key.Load() != ptr {
			continue
		}
		if wordOwner(w) != owner {
			return 0, false
		}
		if n.word.CompareAndSwap(w, 0) {
			return w, true
		}
		// Lost a race with another free of ptr or the node was reused;
		// look again so that the outcome reflects the current state.
		goto retry
	}
	return 0, false
}

// removeOwner removes every live record of owner and returns the bytes
// removed. O(buckets + records); used only by Account.Close.
func (m *recordMap) removeOwner(owner uint16) (total uint64) {
	for i := range m.buckets {
		for n := m.buckets[i].Load(); n != nil; n = n.next {
			for {
				w := n.word.Load()
				if !wordLive(w) || wordOwner(w) != owner {
					break
				}
				if n.word.CompareAndSwap(w, 0) {
					total += wordSize(w)
					break
				}
			}
		}
	}
	return total
}

// snapshot appends the live records of owner to dst.
func (m *recordMap) snapshot(owner uint16, dst []Allocation) []Allocation {
	for i := range m.buckets {
		for n := m.buckets[i].Load(); n != nil; n = n.next {
			w := n.word.Load()
			if !wordLive(w) || wordOwner(w) != owner {
				continue
			}
			k := n.key.Load()
			if n.word.Load() != w { // changed under us; skip
				continue
			}
			dst = append(dst, Allocation{Ptr: k, Size: wordSize(w)})
		}
	}
	return dst
}

// get is the live word of ptr.
func (m *recordMap) get(ptr uint64) (uint64, bool) {
	for n := m.buckets[bucketOf(ptr)].Load(); n != nil; n = n.next {
		w := n.word.Load()
		if wordLive(w) && n.key.Load() == ptr && n.word.Load() == w {
			return w, true
		}
	}
	return 0, false
}

// removeWordAt removes ptr's node holding exactly w from bucket i, if
// any.
func (m *recordMap) removeWordAt(i, ptr, w uint64) {
	for n := m.buckets[i].Load(); n != nil; n = n.next {
		if n.word.Load() == w && n.key.Load() == ptr && n.word.CompareAndSwap(w, 0) {
			return
		}
	}
}

// spanMap indexes the live records by where they lie, so that the record
// holding a pointer inside it is found without a scan (Tracker.Block). A
// record of size in [2^L, 2^(L+1)) is kept under its level L and the
// 2^L-byte window of its base (base >> L): no two live records of one
// level share a window, as each is at least 2^L bytes long and they do not
// overlap. A pointer inside such a record lies less than 2^(L+1) bytes
// past its base, so the record's window is the pointer's or one of the two
// before it: three probes for each level in use find it. The words are the
// records' own (size and owner).
type spanMap struct {
	m recordMap
	// levels has bit L set once a record of level L was made (never
	// cleared: a level no longer in use costs its three probes, no more).
	levels atomic.Uint64
}

func levelOf(size uint64) uint { return uint(bits.Len64(size)) - 1 }

// spanBucket is the bucket of window win of level l: a multiplicative
// (Fibonacci) hash, cheaper than the records' FNV-1a, whose top bits mix
// the window's every bit. Every probe checks the node's level and window.
func spanBucket(l uint, win uint64) uint64 {
	return ((win<<6 ^ uint64(l)) * 0x9e3779b97f4a7c15) >> (64 - 12) // 4096 buckets
}

func (s *spanMap) insert(ptr, w uint64) {
	l := levelOf(wordSize(w))
	if s.levels.Load()&(1<<l) == 0 {
		s.levels.Or(1 << l)
	}
	s.m.insertAt(spanBucket(l, ptr>>l), ptr, w)
}

func (s *spanMap) remove(ptr, w uint64) {
	l := levelOf(wordSize(w))
	s.m.removeWordAt(spanBucket(l, ptr>>l), ptr, w)
}

// find is the span holding p: its base and word.
func (s *spanMap) find(p uint64) (base, w uint64, ok bool) {
	for levels := s.levels.Load(); levels != 0; levels &= levels - 1 {
		l := uint(bits.TrailingZeros64(levels))
		win := p >> l
		for d := uint64(0); d < 3 && d <= win; d++ {
			for n := s.m.buckets[spanBucket(l, win-d)].Load(); n != nil; n = n.next {
				w := n.word.Load()
				if !wordLive(w) || levelOf(wordSize(w)) != l {
					continue
				}
				base := n.key.Load()
				if base>>l != win-d || n.word.Load() != w {
					continue
				}
				if p >= base && p-base < wordSize(w) {
					return base, w, true
				}
			}
		}
	}
	return 0, 0, false
}

// Block is the live allocation, of any account of the tracker, that holds
// ptr: at its start or inside it. ok is false where none does (a pointer
// the SDK did not allocate, or one freed). A pointer at an allocation's
// start costs one probe of the records; one inside it three for each size
// class (power of two) in use. It allocates nothing and takes no lock.
func (t *Tracker) Block(ptr uint64) (Allocation, bool) {
	if w, ok := t.records.get(ptr); ok {
		return Allocation{Ptr: ptr, Size: wordSize(w)}, true
	}
	base, w, ok := t.spans.find(ptr)
	if !ok {
		return Allocation{}, false
	}
	// The record itself says the span is current (a free racing the look
	// may have removed the record and not yet its span).
	if rw, live := t.records.get(base); !live || rw != w {
		return Allocation{}, false
	}
	return Allocation{Ptr: base, Size: wordSize(w)}, true
}

// addRecord records ptr with word w and its span; false if ptr is live.
func (t *Tracker) addRecord(ptr, w uint64) bool {
	if !t.records.insert(ptr, w) {
		return false
	}
	t.spans.insert(ptr, w)
	return true
}

// dropRecord removes owner's record of ptr and its span, returning its
// word.
func (t *Tracker) dropRecord(ptr uint64, owner uint16) (uint64, bool) {
	w, ok := t.records.remove(ptr, owner)
	if ok {
		t.spans.remove(ptr, w)
	}
	return w, ok
}

// dropOwner removes every record of owner, and their spans, returning the
// bytes removed.
func (t *Tracker) dropOwner(owner uint16) uint64 {
	n := t.records.removeOwner(owner)
	t.spans.m.removeOwner(owner)
	return n
}
