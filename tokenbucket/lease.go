package tokenbucket

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A lease lets the only stream of a Limiter admit launches with one CAS,
// on a word of its own that also counts them (issue 19: a launch on the
// device bucket costs its CAS plus the stream's counter, two locked
// instructions). The stream takes a slice [base, end) of the device
// bucket's timeline in one charge, as one acquire of end-base ns would,
// and then spends it: a launch of c ns is admitted at max(cursor, now)
// while that plus c stays within end. The slice drains with time exactly
// as the device's backlog does (what lies below now is gone), so the
// unused part of every live slice lies within the device's backlog: the
// tenant never admits more than its rate and burst, with or without a
// lease.
//
// The rules that keep it so:
//   - at most one lease is live, granted and revoked under leases.mu, and
//     only while the limiter has one stream (NewStream revokes);
//   - the device bucket refuses refunds that would lower its TAT into a
//     live slice (Bucket.keep); the owner returns its lease before any
//     refund, reservation or wait of its own, so that its unused tokens
//     are there for it;
//   - a lease of an older rate generation is not spent: SetRate rescaled
//     the backlog it lies in; revoking it gives back its unused tokens.
//
// The slice is cut into parts, each with a cursor word on a cache line of
// its own (issue 29): goroutines sharing the stream spread over the parts
// instead of retrying a CAS on one line that many cores keep in flight
// (issue 29: 16 to 64 goroutines on one stream, P50 3x a mutex's). Parts are
// disjoint pieces of the slice, each spent as the slice was, so every
// admission still takes a distinct c ns of the device's timeline at or
// after now: the bound is the same. A launch that finds its part spent
// tries the others before it gives up on the lease, so no token of the
// slice is held back from it.
type lease struct {
	s         *Stream
	p         *params // the device's parameters it was granted under
	base, end int64   // device bucket time
	granted   int64   // device bucket time of the reading it was granted at
	// The charge of the launch it was granted for: launches mostly repeat
	// one cost, and the float conversion is a third of the fast path.
	cost float64
	c    int64
	// parts[i] spends [base+i*size, base+(i+1)*size), the last one up
	// to end; size is a whole number of launches of c, so that launches
	// of the lease's cost leave no gap at a part's end.
	size  int64
	inv   float64 // 1/size
	parts []leasePart
}

// leasePart is one part's word: dead | admissions counted here | cursor -
// base, alone on its cache line (and the adjacent one, which x86 fetches
// in pairs).
type leasePart struct {
	_    [64]byte
	word atomic.Uint64
	_    [56]byte
}

// maxLeaseParts bounds the parts of a lease: one per two Ps up to here.
const maxLeaseParts = 16

// limit is the end of part i, relative to base.
func (ls *lease) limit(i int) int64 {
	if i == len(ls.parts)-1 {
		return ls.end - ls.base
	}
	return int64(i+1) * ls.size
}

const (
	leaseOffBits   = 40
	leaseOffMask   = 1<<leaseOffBits - 1
	leaseCountMask = 1<<23 - 1
	leaseDead      = 1 << 63
	// leaseParts: a lease takes at most 1/leaseParts of the burst, so
	// that what it holds back from a refund or a reservation of its owner
	// (which returns it first) stays small.
	leaseParts = 8
	// A lease that admitted fewer than leaseMinUse launches did not pay
	// for its grant (launches sparser than its slice lasts, or a burst of
	// a few ns): the stream then goes without one for leaseBackoff or a
	// burst's time, whichever is longer, or until leaseMinUse launches
	// have come through the device word.
	leaseMinUse  = 8
	leaseBackoff = int64(100 * time.Microsecond)
)

type leases struct {
	mu      sync.Mutex // grants and revocations
	cur     atomic.Pointer[lease]
	streams atomic.Int32 // open streams: leases only while there is one
	skip    atomic.Int64 // device bucket time before which no lease is granted
	// ... unless the stream's admitted count has reached this since.
	skipN atomic.Uint64
}

// leased admits cost on s's live lease if it holds the tokens now, and
// returns the device's parameters it was charged under (the lease's);
// nil: not admitted.
func (l *Limiter) leased(s *Stream, cost float64, raw int64) *params {
	ls := l.ls.cur.Load()
	if ls == nil || ls.s != s {
		return nil
	}
	c := ls.c
	if cost != ls.cost {
		c = ls.p.charge(cost)
	}
	d := l.device
	now := raw - d.start
	// One read of the device's word (it is not written) for two checks.
	// The generation: SetSMLimit returns the lease before it changes the
	// rate, so this only guards against a change made some other way.
	// The debt: one that a direct charge (a launch that did not wait for
	// a renewal) left since the grant holds the lease back too, as it
	// holds back any launch. (What such a charge owes is repaid by the
	// launches after this lease: no lease is granted while anything is
	// owed.)
	if st := d.state.Load(); st&genMask != ls.p.gen || st>>genBits-now > ls.p.tau {
		return nil
	}
	// Earliest first, as one cursor would spend the slice: from the part
	// now lies in (those below have drained), moving on when a part is
	// spent or when its CAS fails. A failed CAS means another core has
	// just written that line: retried, it would be fought over by every
	// core that failed with it.
	off := now - ls.base
	k, first := len(ls.parts), 0
	if k > 1 && off > 0 {
		// A float product, not a division: one off near a boundary may
		// pick the part below, which is then found spent.
		first = min(int(float64(off)*ls.inv), k-1)
	}
	for {
		busy := false
		for i := first; i < k; i++ {
			pt := &ls.parts[i]
			w := pt.word.Load()
			if w&leaseDead != 0 || (w>>leaseOffBits)&leaseCountMask == leaseCountMask {
				return nil
			}
			at := max(int64(w&leaseOffMask), off)
			if at+c > ls.limit(i) {
				continue // spent
			}
			if pt.word.CompareAndSwap(w, (w>>leaseOffBits+1)<<leaseOffBits|uint64(at+c)) {
				return ls.p
			}
			busy = true
		}
		if !busy {
			return nil
		}
	}
}

// admitDevice admits cost on the device bucket at reading raw, counting
// it, and returns the parameters it was charged under; nil: not admitted,
// nothing taken. A single stream renews its lease here (the launch is
// then counted in the new lease's word).
func (l *Limiter) admitDevice(s *Stream, cost float64, raw int64) *params {
	if l.ls.streams.Load() == 1 && (raw-l.device.start >= l.ls.skip.Load() ||
		s.admitted.Load() >= l.ls.skipN.Load()) && l.ls.mu.TryLock() {
		// TryLock: a launch never waits for another's renewal; it is
		// charged on the device bucket instead, which is always safe.
		p := l.renewLocked(s, cost, raw)
		l.ls.mu.Unlock()
		if p != nil {
			return p
		}
	}
	if k, ok := l.device.tryAt(cost, raw); ok {
		s.admitted.Add(1)
		return k.p
	}
	return nil
}

// admitShared is admitDevice after the live lease: a share-1 stream's
// admission (twoTier).
func (l *Limiter) admitShared(s *Stream, cost float64, raw int64) *params {
	if p := l.leased(s, cost, raw); p != nil {
		return p
	}
	return l.admitDevice(s, cost, raw)
}

// renewLocked returns the live lease and grants s a new one holding this
// launch, if the limiter has one stream, nothing is owed, and the device
// holds the launch now; it returns the parameters the launch was charged
// under (nil: not admitted). Called with l.ls.mu held.
func (l *Limiter) renewLocked(s *Stream, cost float64, raw int64) *params {
	// Another launch may have renewed the lease since this one found it
	// spent: spend that one. Revoked this young it would look unpaid and
	// hold leases off for a burst's time, every launch on the device word
	// meanwhile: with many goroutines on one stream, launches that found
	// the old lease spent together did that at every renewal (issue 29).
	// A launch whose reading predates the live lease's grant (one
	// descheduled between the two) cannot judge it either.
	d := l.device
	if p := l.leased(s, cost, raw); p != nil {
		return p
	}
	if ls := l.ls.cur.Load(); ls != nil && raw-d.start < ls.granted {
		return nil
	}
	old, n, at := l.revokeLocked()
	if old != nil && n < leaseMinUse {
		// A lease that could hold leaseMinUse launches and went unused
		// may only have outlived a pause of the whole process (a
		// descheduled VM, a GC): launches that keep coming end the skip
		// early, or a stream of many goroutines spends a burst's time on
		// the device word (issue 29). One that could not (a burst of a
		// few launches) waits the skip out: it would not pay next time
		// either.
		skipN := uint64(math.MaxUint64)
		if old.end-old.base >= leaseMinUse*old.c {
			skipN = s.admitted.Load() + leaseMinUse
		}
		l.ls.skipN.Store(skipN)
		l.ls.skip.Store(raw - d.start + max(d.params.Load().tau, leaseBackoff))
		return nil
	}
	// The new slice starts no earlier than the revocation's reading: one
	// granted at a reading taken before a descheduling would lie in the
	// past, spent before any launch could use it.
	raw = max(raw, at+d.start)
	if l.ls.streams.Load() != 1 || s.closed.Load() {
		return nil
	}
	d.keep.Store(math.MaxInt64) // no refund into the slice while it is granted
	base, end, p, ok := d.grab(cost, raw)
	if !ok {
		d.keep.Store(0)
		return nil
	}
	d.keep.Store(end)
	ls := &lease{s: s, p: p, base: base, end: end, granted: raw - d.start, cost: cost, c: p.charge(cost)}
	// One part per two Ps (two cores on one line cost little: on two,
	// two parts cost more than they saved), each worth at least
	// leaseMinUse launches.
	k := min(max(int64(runtime.GOMAXPROCS(0)/2), 1), maxLeaseParts, max((end-base)/(max(ls.c, 1)*leaseMinUse), 1)) // GOMAXPROCS may be 1 (testing.AllocsPerRun sets it)
	ls.size = (end - base) / ls.c / k * ls.c
	ls.inv = 1 / float64(ls.size)
	ls.parts = make([]leasePart, k)
	for i := range ls.parts {
		ls.parts[i].word.Store(uint64(int64(i) * ls.size))
	}
	ls.parts[0].word.Store(1<<leaseOffBits | uint64(ls.c)) // the launch it was granted for
	l.ls.cur.Store(ls)
	return p
}

// returnLease revokes the live lease, if any, giving its unused tokens
// back to the device bucket.
func (l *Limiter) returnLease() {
	if l.ls.cur.Load() == nil {
		return
	}
	l.ls.mu.Lock()
	l.revokeLocked()
	l.ls.mu.Unlock()
}

// revokeLocked returns the live lease, if there was one (else nil), what
// it counted and the device bucket time it read (math.MinInt64 if none).
func (l *Limiter) revokeLocked() (ls *lease, count uint64, at int64) {
	ls = l.ls.cur.Load()
	if ls == nil {
		return nil, 0, math.MinInt64
	}
	var ws [maxLeaseParts]uint64
	for i := range ls.parts {
		ws[i] = ls.parts[i].word.Or(leaseDead)
	}
	// What the parts hold at or after now (read once all are dead): the
	// rest has drained.
	d := l.device
	var unused int64
	at = d.now()
	off := at - ls.base
	for i, w := range ws[:len(ls.parts)] {
		count += (w >> leaseOffBits) & leaseCountMask
		unused += max(ls.limit(i)-max(int64(w&leaseOffMask), off), 0)
	}
	l.ls.cur.Store(nil)
	d.keep.Store(0)
	if unused > 0 {
		d.refundNs(unused, ls.p) // keep is 0 and mu held: no lease in the way
	}
	ls.s.admitted.Add(count)
	return ls, count, at
}

// giveBackDevice gives k back to the device bucket, and what a live lease
// kept it from giving once the lease is returned.
func (l *Limiter) giveBackDevice(k took) {
	if left, p := l.device.giveBack(k); left > 0 {
		l.giveBackUnderLease(left, p)
	}
}

// refundDevice gives n tokens taken under from (nil: the current
// parameters) back to the device bucket, as giveBackDevice.
func (l *Limiter) refundDevice(n float64, from *params) {
	if left, p := l.device.refundFrom(n, from); left > 0 {
		l.giveBackUnderLease(left, p)
	}
}

// giveBackUnderLease returns the live lease (a grant may have come
// between a refund and its caller) and then gives back ns at the interval
// of p, under the lock so that no new lease comes in between.
func (l *Limiter) giveBackUnderLease(ns int64, p *params) {
	l.ls.mu.Lock()
	defer l.ls.mu.Unlock()
	l.revokeLocked()
	l.device.refundNs(ns, p)
}

// leaseCount is what s's live lease has counted.
func (l *Limiter) leaseCount(s *Stream) uint64 {
	ls := l.ls.cur.Load()
	if ls == nil || ls.s != s {
		return 0
	}
	var n uint64
	for i := range ls.parts {
		w := ls.parts[i].word.Load()
		if w&leaseDead != 0 {
			return 0 // being revoked: the count moves to s.admitted
		}
		n += (w >> leaseOffBits) & leaseCountMask
	}
	return n
}

// grab charges a slice for a lease holding a launch of n tokens at
// reading raw: up to 1/leaseParts of the burst, never more than the
// bucket holds, only when nothing is owed and the launch fits now.
func (b *Bucket) grab(n float64, raw int64) (base, end int64, p *params, ok bool) {
	now := raw - b.start
	s := b.state.Load()
	p = b.params.Load()
	if s&genMask != p.gen || b.owed.Load() != 0 || !(n > 0) || math.IsInf(n, 1) {
		return 0, 0, nil, false
	}
	tat := max(s>>genBits, now)
	c := p.charge(n)
	room := p.tau - (tat - now)
	if c > room || c > leaseOffMask {
		return 0, 0, nil, false
	}
	size := min(max(c, p.tau/leaseParts), room, leaseOffMask)
	if !b.state.CompareAndSwap(s, (tat+size)<<genBits|p.gen) {
		return 0, 0, nil, false
	}
	return tat, tat + size, p, true
}
