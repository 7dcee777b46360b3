package memtrack

import "sync/atomic"

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
	numBuckets    = 4096                   // power of two
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
func (m *recordMap) insert(ptr, w uint64) bool {
	b := &m.buckets[bucketOf(ptr)]
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
