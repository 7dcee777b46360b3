package tokenbucket

import (
	"context"
	"math"
)

// WaitCost is Wait for a cost that depends on the SM limit (Limiter.Cost
// does, through the throttle penalty; a GPU share's is 0 at share 1). cost
// is evaluated before the first attempt and again whenever SetSMLimit wakes
// the waiter, so a launch waiting when the limit changes is charged, and
// waits, at the new limit's price instead of the one it computed under the
// old limit. It returns the cost it charged (0 if none).
//
// Errors are Wait's: ErrInvalidAmount for a NaN or infinite cost (taking
// nothing), ErrClosed, ctx's error, or one matching
// context.DeadlineExceeded when the deadline falls before the tokens are
// due; on error nothing is charged.
func (s *Stream) WaitCost(ctx context.Context, cost func() float64) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var raw, start int64
	var c float64
	clocked, waited := false, false // the clock is read once a cost is due, not for a free admission
	for {
		// wake before the cost: SetSMLimit stores the limit before it
		// closes this channel, so a cost read after a change is either the
		// new one or woken again.
		wake := *s.l.wake.Load()
		c = cost()
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return 0, ErrInvalidAmount
		}
		if c <= 0 {
			c = 0 // free (perhaps only since a change of limit woke it)
			break
		}
		if s.closed.Load() {
			return 0, ErrClosed
		}
		if !clocked {
			raw, clocked = s.l.clock(), true
			start = raw
			// Wait's fast path (issue 19): a share-1 stream whose tenant
			// holds the tokens now is admitted, and counted, on its lease
			// or the device bucket.
			if !s.own && (s.l.leased(s, c, raw) || s.l.admitDevice(s, c, raw)) {
				return c, nil
			}
		}
		w, err := s.wait(ctx, c, raw, wake)
		waited = waited || w
		if err == errWoken {
			raw = s.l.clock()
			continue // closed, or a new limit: evaluate the cost again
		}
		if err != nil {
			return 0, err
		}
		break
	}
	if waited {
		s.throttled.Add(1)
		s.waitNanos.Add(s.l.clock() - start)
	}
	s.admitted.Add(1)
	return c, nil
}
