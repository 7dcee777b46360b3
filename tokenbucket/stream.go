package tokenbucket

import (
	"context"
	"math"
	"sync/atomic"
)

// Stream is one stream's view of a Limiter: its own bucket, holding a share
// of the device bucket's capacity and rate, in front of the shared device
// bucket. Methods are safe for concurrent use.
type Stream struct {
	l      *Limiter
	bucket *Bucket
	share  float64
	closed atomic.Bool

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
	b, err := NewBucket(l.device.Rate()*share, l.capacity*share, WithClock(l.cfg.Clock))
	if err != nil {
		return nil, err
	}
	s := &Stream{l: l, bucket: b, share: share}
	l.streams[s] = struct{}{}
	return s, nil
}

// Share returns the stream's fraction of the device bucket.
func (s *Stream) Share() float64 { return s.share }

// TryAcquire admits a launch of the given cost (from Limiter.Cost) if both
// the stream bucket and the device bucket hold it now, taking it from both;
// otherwise it takes nothing. A cost <= 0 (NCCL's is 0) is always admitted without
// touching either bucket. A closed stream admits nothing.
func (s *Stream) TryAcquire(cost float64) bool {
	if cost <= 0 {
		s.admitted.Add(1)
		return true
	}
	if s.closed.Load() || !s.bucket.TryAcquire(cost) {
		s.rejected.Add(1)
		return false
	}
	if !s.l.device.TryAcquire(cost) {
		// The stream had room but the device did not: give the stream its
		// tokens back, or it would pay for a launch that never happened.
		s.bucket.Refund(cost)
		s.rejected.Add(1)
		return false
	}
	s.admitted.Add(1)
	return true
}

// Wait admits a launch of the given cost, blocking until the stream bucket
// and then the device bucket hold it. Device tokens are reserved only once
// the stream's own are due, so a stream waiting on its share holds nothing
// the other streams could use. On cancellation it returns ctx.Err() and
// refunds both buckets. It returns ErrClosed on a closed stream and
// ErrInvalidAmount for a NaN or infinite cost.
func (s *Stream) Wait(ctx context.Context, cost float64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if math.IsNaN(cost) || math.IsInf(cost, 0) {
		return ErrInvalidAmount
	}
	if cost <= 0 {
		s.admitted.Add(1)
		return nil
	}
	if s.closed.Load() {
		return ErrClosed
	}
	due, start := s.bucket.reserve(cost)
	waited := due > start
	if waited {
		if err := s.bucket.sleepUntil(ctx, due); err != nil {
			s.bucket.Refund(cost)
			return err
		}
	}
	if due, now := s.l.device.reserve(cost); due > now {
		waited = true
		if err := s.l.device.sleepUntil(ctx, due); err != nil {
			s.l.device.Refund(cost)
			s.bucket.Refund(cost)
			return err
		}
	}
	if waited {
		s.throttled.Add(1)
		s.waitNanos.Add(s.bucket.now() - start)
	}
	s.admitted.Add(1)
	return nil
}

// Stats returns the stream's counters. Each is read atomically; the set is
// not a consistent snapshot while acquires are in flight.
func (s *Stream) Stats() Stats {
	return Stats{
		Admitted:  s.admitted.Load(),
		Rejected:  s.rejected.Load(),
		Throttled: s.throttled.Load(),
		WaitNanos: s.waitNanos.Load(),
	}
}

// Close detaches the stream from its Limiter: SetSMLimit stops updating it
// and it admits nothing more. Close is idempotent and always returns nil.
func (s *Stream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.l.mu.Lock()
	delete(s.l.streams, s)
	s.l.mu.Unlock()
	return nil
}
