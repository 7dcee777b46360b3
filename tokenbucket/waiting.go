package tokenbucket

import (
	"context"
	"math"
)

// Waiting is one admission's wait on a Stream, kept across the prices its
// caller gives it. An admission whose cost depends on the SM limit
// (Limiter.Cost's does, through the throttle penalty; a GPU share's is 0
// at share 1) takes a Mark, prices itself under the limit it then reads,
// and calls Wait with the cost and the mark. When the limiter has changed
// since the mark (SetSMLimit, SetSMs, a stream closed), Wait takes nothing
// and returns ErrLimitChanged: the caller takes a new mark, prices again
// and calls Wait again on the same Waiting, so that the stream counts the
// admission, and the time it waited, once.
//
// golang.org/x/time/rate prices an event once, at its reservation, and a
// change of limit leaves a waiting reservation as it was; here a wait may
// outlast a change of share that makes the work free, so the price is the
// caller's to make again rather than the bucket's to call back for. The
// zero Waiting is ready; it lives on the caller's stack.
type Waiting struct {
	start   int64 // the clock when the admission was first timed
	clocked bool  // start is set
	waited  bool  // it has had to wait
	took    Mark  // the parameters the admitted cost was taken under
}

// Mark is the mark of the parameters the cost a nil Wait admitted was
// taken under (see Mark): AdjustSince(-cost, w.Mark()) gives back what
// it took. Before that, or for a free cost, it is the zero Mark.
func (w *Waiting) Mark() Mark { return w.took }

// Wait takes cost from s, blocking until the stream bucket and then the
// device bucket hold it, as Stream.Wait does (which is Wait with the zero
// Mark: a cost that stays as it is whatever the limit). A cost priced
// under mark m (Stream.Mark, taken before the limit was read) is not
// waited for once the limiter has changed since m: Wait then returns
// ErrLimitChanged, having taken nothing.
//
// An admission that need not wait reads the clock once, and a free one
// (cost <= 0) not at all. Errors are Stream.Wait's, besides
// ErrLimitChanged; on any error nothing is charged.
func (w *Waiting) Wait(ctx context.Context, s *Stream, cost float64, m Mark) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var raw int64
	if cost > 0 && cost <= math.MaxFloat64 && !w.clocked {
		raw = s.l.clock()
		w.start, w.clocked = raw, true
		// The fast path of a share-1 stream whose tenant holds the tokens
		// now (issue 19): what TryAcquire does, taking nothing when they
		// are not there. The test above also refuses NaN and ±Inf.
		if !s.own && !s.closed.Load() {
			if p := s.l.admitShared(s, cost, raw); p != nil {
				w.took = Mark{d: p}
				return nil
			}
		}
	} else {
		if math.IsNaN(cost) || math.IsInf(cost, 0) {
			return ErrInvalidAmount
		}
		if cost <= 0 && !w.waited {
			s.admitted.Add(1) // free: nothing to time
			return nil
		}
		if cost <= 0 {
			return w.admitted(s) // free since a change of limit woke its wait
		}
		raw = s.l.clock() // a price made again: time has passed since
	}
	for {
		// wake before closed and before the mark's check: a Close or a
		// change after these loads closes this channel.
		wake := s.l.wake.Load()
		if s.closed.Load() {
			return ErrClosed
		}
		if m.gen != nil && wake != m.gen {
			return ErrLimitChanged
		}
		waited, err := s.wait(ctx, cost, raw, *wake, &w.took)
		w.waited = w.waited || waited
		if err == errWoken {
			raw = s.l.clock()
			continue // closed, or a change: look again
		}
		if err != nil {
			return err
		}
		return w.admitted(s)
	}
}

// admitted counts an admission on s, and its wait if it had one.
func (w *Waiting) admitted(s *Stream) error {
	if w.waited {
		s.throttled.Add(1)
		s.waitNanos.Add(s.l.clock() - w.start)
	}
	s.admitted.Add(1)
	return nil
}
