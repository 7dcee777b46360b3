package tokenbucket

import (
	"math"
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
type lease struct {
	s         *Stream
	p         *params // the device's parameters it was granted under
	base, end int64   // device bucket time
	// The charge of the launch it was granted for: launches mostly repeat
	// one cost, and the float conversion is a third of the fast path.
	cost float64
	c    int64
	// dead | admissions counted here | cursor - base
	word atomic.Uint64
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
	// burst's time, whichever is longer.
	leaseMinUse  = 8
	leaseBackoff = int64(100 * time.Microsecond)
)

type leases struct {
	mu      sync.Mutex // grants and revocations
	cur     atomic.Pointer[lease]
	streams atomic.Int32 // open streams: leases only while there is one
	skip    atomic.Int64 // device bucket time before which no lease is granted
}

// leased admits cost on s's live lease if it holds the tokens now.
func (l *Limiter) leased(s *Stream, cost float64, raw int64) bool {
	ls := l.ls.cur.Load()
	if ls == nil || ls.s != s {
		return false
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
		return false
	}
	for {
		w := ls.word.Load()
		if w&leaseDead != 0 || (w>>leaseOffBits)&leaseCountMask == leaseCountMask {
			return false
		}
		at := max(ls.base+int64(w&leaseOffMask), now)
		if at+c > ls.end {
			return false
		}
		next := (w>>leaseOffBits+1)<<leaseOffBits | uint64(at+c-ls.base)
		if ls.word.CompareAndSwap(w, next) {
			return true
		}
	}
}

// admitDevice admits cost on the device bucket at reading raw, counting
// it, or reports false having taken nothing. A single stream renews its
// lease here (the launch is then counted in the new lease's word).
func (l *Limiter) admitDevice(s *Stream, cost float64, raw int64) bool {
	if l.ls.streams.Load() == 1 && raw-l.device.start >= l.ls.skip.Load() && l.ls.mu.TryLock() {
		// TryLock: a launch never waits for another's renewal; it is
		// charged on the device bucket instead, which is always safe.
		ok := l.renewLocked(s, cost, raw)
		l.ls.mu.Unlock()
		if ok {
			return true
		}
	}
	if _, ok := l.device.tryAt(cost, raw); ok {
		s.admitted.Add(1)
		return true
	}
	return false
}

// renewLocked returns the live lease and grants s a new one holding this
// launch, if the limiter has one stream, nothing is owed, and the device
// holds the launch now. Called with l.ls.mu held.
func (l *Limiter) renewLocked(s *Stream, cost float64, raw int64) bool {
	d := l.device
	if had, n := l.revokeLocked(); had && n < leaseMinUse {
		l.ls.skip.Store(raw - d.start + max(d.params.Load().tau, leaseBackoff))
		return false
	}
	if l.ls.streams.Load() != 1 || s.closed.Load() {
		return false
	}
	d.keep.Store(math.MaxInt64) // no refund into the slice while it is granted
	base, end, p, ok := d.grab(cost, raw)
	if !ok {
		d.keep.Store(0)
		return false
	}
	d.keep.Store(end)
	ls := &lease{s: s, p: p, base: base, end: end, cost: cost, c: p.charge(cost)}
	ls.word.Store(1<<leaseOffBits | uint64(ls.c))
	l.ls.cur.Store(ls)
	return true
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

// revokeLocked returns the live lease, if there was one, and what it
// counted.
func (l *Limiter) revokeLocked() (had bool, count uint64) {
	ls := l.ls.cur.Load()
	if ls == nil {
		return false, 0
	}
	var w uint64
	for {
		w = ls.word.Load()
		if ls.word.CompareAndSwap(w, w|leaseDead) {
			break
		}
	}
	l.ls.cur.Store(nil)
	d := l.device
	d.keep.Store(0)
	if unused := ls.end - max(ls.base+int64(w&leaseOffMask), d.now()); unused > 0 {
		d.refundNs(unused, ls.p) // keep is 0 and mu held: no lease in the way
	}
	count = (w >> leaseOffBits) & leaseCountMask
	ls.s.admitted.Add(count)
	return true, count
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
	w := ls.word.Load()
	if w&leaseDead != 0 {
		return 0 // being revoked: the count moves to s.admitted
	}
	return (w >> leaseOffBits) & leaseCountMask
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
