package tokenbucket

import (
	"context"
	"math"
	"sync/atomic"
	"time"
)

// Stream is one stream's view of a Limiter: its own bucket, holding a share
// of the device bucket's capacity and rate, in front of the shared device
// bucket. Methods are safe for concurrent use.
//
// A stream of share 1 is charged on the device bucket alone (one clock read
// and one CAS per admission): its own bucket would have the device's rate
// and burst and see a subset of the device's charges, so it could never
// refuse what the device admits. The only stream of a Limiter admits
// from a lease of device tokens, one CAS on its own word.
type Stream struct {
	l      *Limiter
	bucket *Bucket // kept at the share's rate by SetSMLimit; charged only if own
	share  float64
	own    bool // charge bucket too: share < 1 (see twoTier)
	closed atomic.Bool

	// The counters, written by launches on the device word (a stream
	// without a lease), on a line apart from what every launch reads.
	_         [64]byte
	admitted  atomic.Uint64
	rejected  atomic.Uint64
	throttled atomic.Uint64
	waitNanos atomic.Int64
}

// Stats are a stream's counters since NewStream.
type Stats struct {
	Admitted  uint64 // acquires that succeeded, including zero-cost ones
	Rejected  uint64 // TryAcquire calls that took nothing
	Throttled uint64 // Wait calls that had to wait before succeeding
	WaitNanos int64  // total time those Wait calls waited, in clock nanoseconds
}

// NewStream adds a stream whose bucket gets share (in (0, 1]) of the device
// bucket's capacity and refill rate. Shares need not sum to 1: the device
// bucket bounds the total either way.
func (l *Limiter) NewStream(share float64) (*Stream, error) {
	if !(share > 0 && share <= 1) {
		return nil, invalid("share", share, "a fraction of the device in (0, 1]")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Under mu, so that a concurrent SetSMLimit cannot leave this stream at
	// the old rate.
	b, err := NewBucket(l.device.Rate()*share, l.Capacity()*share, WithClock(l.cfg.Clock), WithMaxDebt(l.maxDebt()))
	if err != nil {
		return nil, err
	}
	s := &Stream{l: l, bucket: b, share: share, own: share < 1}
	l.streams[s] = struct{}{}
	if l.ls.streams.Add(1) > 1 {
		// Leases only while there is one stream. Under the lock, so that
		// a grant decided before the count rose is revoked here too.
		l.ls.mu.Lock()
		l.revokeLocked()
		l.ls.mu.Unlock()
	}
	return s, nil
}

// Share returns the stream's fraction of the device bucket.
func (s *Stream) Share() float64 { return s.share }

// twoTier reports whether the stream's own bucket is charged at all. At
// share 1 it has the device bucket's rate, burst and debt bound and sees a
// subset of the device's charges, so the device tier alone already bounds
// the stream (TestShareOneMatchesTwoTiers); skipping it saves a CAS on
// every launch (issue 19). Where the two parted, it was the stream tier
// refusing tokens the tenant held, after a sibling's refund lowered the
// device's backlog but not this stream's (TestShareOneNeverRefuses...).
func (s *Stream) twoTier() bool { return s.own }

// TryAcquire admits a launch of the given cost (from Limiter.Cost) if both
// the stream bucket and the device bucket hold it now, taking it from both;
// otherwise it takes nothing. A cost <= 0 (NCCL's is 0) is always admitted without
// touching either bucket. A closed stream admits nothing. It reads the clock
// once.
func (s *Stream) TryAcquire(cost float64) bool {
	var m Mark
	return s.TryAcquireMark(cost, &m)
}

// TryAcquireMark is TryAcquire that, when it takes a cost > 0, dates *m
// to the parameters it was taken under (see Mark), keeping the date of the
// price that m holds: AdjustSince(-cost, *m) then gives back what it took,
// whatever changed between the price and the charge.
func (s *Stream) TryAcquireMark(cost float64, m *Mark) bool {
	if cost <= 0 {
		s.admitted.Add(1)
		return true
	}
	if s.closed.Load() {
		s.rejected.Add(1)
		return false
	}
	raw := s.l.clock()
	if !s.twoTier() {
		if p := s.l.admitShared(s, cost, raw); p != nil {
			m.s, m.d = nil, p
			return true
		}
		s.rejected.Add(1)
		return false
	}
	ks, ok := s.bucket.tryAt(cost, raw)
	if !ok {
		s.rejected.Add(1)
		return false
	}
	kd, ok := s.l.device.tryAt(cost, raw)
	if !ok {
		// The stream had room but the device did not: give the stream its
		// tokens back, or it would pay for a launch that never happened.
		s.bucket.giveBack(ks)
		s.rejected.Add(1)
		return false
	}
	m.s, m.d = ks.p, kd.p
	s.admitted.Add(1)
	return true
}

// Wait admits a launch of the given cost, blocking until the stream bucket
// and then the device bucket hold it. Device tokens are reserved only once
// the stream's own are due, so a stream waiting on its share holds nothing
// the other streams could use. An admission that need not wait reads the
// clock once.
//
// It returns at once, taking nothing, with an error matching
// context.DeadlineExceeded when ctx's deadline falls before the tokens are
// due. On cancellation it returns ctx.Err() and gives both buckets back
// what it took. Close (of the stream or its Limiter) wakes it with
// ErrClosed; SetSMLimit wakes it to re-reserve the same cost under the new
// rate. It returns ErrInvalidAmount for a NaN or infinite cost.
//
// Wait is for a cost that does not depend on the limit. A caller whose
// cost does prices it again after a change, with a Waiting: Wait is
// Waiting.Wait with the zero Mark, so the two are one path.
func (s *Stream) Wait(ctx context.Context, cost float64) error {
	var w Waiting
	return w.Wait(ctx, s, cost, Mark{})
}

// wait is one attempt of Wait at clock reading raw; it dates *m to the
// parameters it took the cost under. On error it has given back
// everything it took.
func (s *Stream) wait(ctx context.Context, cost float64, raw int64, wake <-chan struct{}, m *Mark) (waited bool, err error) {
	s.l.returnLease() // its tokens are there for this wait (see lease)
	var ks took
	if s.twoTier() {
		if ks, raw, waited, err = s.waitStream(ctx, cost, raw, wake); err != nil {
			return waited, err
		}
	}
	due, now, kd := s.l.device.reserveAt(cost, raw)
	if due > now {
		waited = true
		if err = beforeDeadline(ctx, due-now); err == nil {
			_, err = s.l.device.sleepUntil(ctx, due, wake)
		}
		if err != nil {
			s.l.giveBackDevice(kd)
			s.bucket.giveBack(ks)
			return waited, err
		}
	}
	m.s, m.d = ks.p, kd.p
	return waited, nil
}

// waitStream reserves cost on the stream's own bucket at clock reading raw
// and waits until it is due, returning the clock reading it woke at (raw if
// it did not wait). On error it has given back what it took.
func (s *Stream) waitStream(ctx context.Context, cost float64, raw int64, wake <-chan struct{}) (ks took, woke int64, waited bool, err error) {
	due, now, ks := s.bucket.reserveAt(cost, raw)
	if due <= now {
		return ks, raw, false, nil
	}
	if err = beforeDeadline(ctx, due-now); err == nil {
		now, err = s.bucket.sleepUntil(ctx, due, wake)
	}
	if err != nil {
		s.bucket.giveBack(ks)
		return ks, raw, true, err
	}
	return ks, now + s.bucket.start, true, nil
}

// Adjust corrects what earlier admissions charged once their true cost is
// known: a positive delta is taken from both buckets at once, going into
// (bounded) debt if they do not hold it; a negative one is given back.
// Nothing waits. What it gives back is taken as charged under the current
// SM limit; for a charge that a change of limit or size may have come
// after, use AdjustSince.
func (s *Stream) Adjust(delta float64) { s.AdjustSince(delta, Mark{}) }

// A Mark dates a charge and its price. It names the parameters a charge
// was taken under, so that what is given back of it later comes back at
// its worth after any change of SM limit or size since: tokens given back
// after the limit fell are scaled down as the tokens in hand were (or a
// charge held across the change would escape it), after it rose up. It
// also dates a price: Waiting.Wait refuses a cost priced under a mark the
// limiter has changed since (ErrLimitChanged), so that the caller prices
// it again. The zero Mark stands for the current parameters.
//
// Take a Mark (Stream.Mark) before pricing, and let the charge date it to
// the parameters it was taken under (TryAcquireMark, Waiting.Mark,
// Reservation.Mark): a change between the price and the charge would
// otherwise be carried into the give-back, which the charge came after,
// minting tokens if the limit rose and losing them if it fell (issue 56).
type Mark struct {
	s, d *params
	gen  *chan struct{} // the limiter's wake channel when taken; nil: the zero Mark
}

// Mark returns the stream's mark now: the date of a price, and the
// parameters now. Take it before the price is computed, so that a change
// after it is seen by the Waiting the price is waited for with.
func (s *Stream) Mark() Mark {
	// The wake channel first: SetSMLimit publishes the limit before it
	// replaces the channel, so a price read after this load is either the
	// new limit's or dated before the change.
	gen := s.l.wake.Load()
	return Mark{s: s.bucket.params.Load(), d: s.l.device.params.Load(), gen: gen}
}

// AdjustSince is Adjust for admissions charged after mark m: a negative
// delta is given back as it would have been before the changes of SM
// limit or size made since m (see Mark). A positive one is Adjust's.
func (s *Stream) AdjustSince(delta float64, m Mark) {
	switch {
	case math.IsNaN(delta) || math.IsInf(delta, 0):
	case delta > 0:
		// The lease first: a debt must hold back the launches after it,
		// and the lease's tokens were taken before it.
		s.l.returnLease()
		raw := s.l.clock()
		if s.twoTier() {
			s.bucket.reserveAt(delta, raw)
		}
		s.l.device.reserveAt(delta, raw)
	case delta < 0:
		s.l.returnLease() // a refund may not reach into a live lease
		if s.twoTier() {
			s.bucket.refundFrom(-delta, m.s)
		}
		s.l.refundDevice(-delta, m.d)
	}
}

// Reservation is an admission taken from a Stream ahead of time: the launch
// may go once Delay has passed (Wait waits for it), or Cancel gives back
// exactly what it took.
type Reservation struct {
	s      *Stream
	ok     bool
	due    int64 // clock reading at which the tokens are due
	ks, kd took
	done   atomic.Bool // used or cancelled
}

// Reserve takes a launch of the given cost from the stream bucket and the
// device bucket at once, going into debt if they do not hold it, and
// returns the Reservation. Unlike Wait it reserves device tokens at once.
// It is not OK (and took nothing) on a closed stream or for a NaN or
// infinite cost.
func (s *Stream) Reserve(cost float64) *Reservation {
	r := &Reservation{s: s}
	if math.IsNaN(cost) || math.IsInf(cost, 0) || s.closed.Load() {
		return r
	}
	raw := s.l.clock()
	r.ok, r.due = true, raw
	if cost <= 0 {
		return r
	}
	s.l.returnLease()
	if s.twoTier() {
		due, _, ks := s.bucket.reserveAt(cost, raw)
		r.ks, r.due = ks, due+s.bucket.start
	}
	due, _, kd := s.l.device.reserveAt(cost, raw)
	r.kd, r.due = kd, max(r.due, due+s.l.device.start)
	return r
}

// OK reports whether the reservation took anything (and may be used).
func (r *Reservation) OK() bool { return r.ok }

// Mark is the mark of the parameters the reservation was taken under:
// AdjustSince(-cost, r.Mark()) gives back what it took (see Mark).
func (r *Reservation) Mark() Mark { return Mark{s: r.ks.p, d: r.kd.p} }

// Delay is how long from now until the reserved tokens are due (0: now).
func (r *Reservation) Delay() time.Duration {
	return time.Duration(max(r.due-r.s.l.clock(), 0))
}

// Cancel gives back what the reservation took, unless it was used (by
// Wait) or cancelled before. The buckets never hold more than full, so
// what time has already refilled is not given twice.
func (r *Reservation) Cancel() {
	if !r.ok || r.done.Swap(true) {
		return
	}
	r.s.l.returnLease()
	r.s.l.giveBackDevice(r.kd)
	r.s.bucket.giveBack(r.ks)
}

// Wait waits until the reservation is due and uses it. It fails at once
// when ctx's deadline falls before that (context.DeadlineExceeded), and
// with ErrClosed when the stream is or gets closed; on any error the
// reservation is cancelled.
func (r *Reservation) Wait(ctx context.Context) error {
	if !r.ok {
		return ErrClosed
	}
	if r.done.Load() {
		return ErrReservationUsed
	}
	s := r.s
	for {
		wake := *s.l.wake.Load()
		err := error(nil)
		switch {
		case s.closed.Load():
			err = ErrClosed
		case ctx.Err() != nil:
			err = ctx.Err()
		}
		if err == nil {
			now := s.l.clock()
			if now >= r.due {
				if r.done.Swap(true) {
					return ErrReservationUsed
				}
				s.admitted.Add(1)
				return nil
			}
			if err = beforeDeadline(ctx, r.due-now); err == nil {
				// The device bucket's sleep works on its own time base.
				_, err = s.l.device.sleepUntil(ctx, r.due-s.l.device.start, wake)
			}
			if err == errWoken {
				continue
			}
			if err == nil {
				continue
			}
		}
		r.Cancel()
		return err
	}
}

// Stats returns the stream's counters. Each is read atomically; the set is
// not a consistent snapshot while acquires are in flight.
func (s *Stream) Stats() Stats {
	// admitted before the lease: a revocation in between moves the lease's
	// count into admitted after this load, so nothing is counted twice.
	admitted := s.admitted.Load()
	return Stats{
		Admitted:  admitted + s.l.leaseCount(s),
		Rejected:  s.rejected.Load(),
		Throttled: s.throttled.Load(),
		WaitNanos: s.waitNanos.Load(),
	}
}

// Close detaches the stream from its Limiter: SetSMLimit stops updating it,
// it admits nothing more, and its waiters return ErrClosed. Close is
// idempotent and always returns nil.
func (s *Stream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.l.mu.Lock()
	delete(s.l.streams, s)
	s.l.ls.streams.Add(-1)
	s.l.kick()
	s.l.mu.Unlock()
	s.l.returnLease()
	return nil
}
