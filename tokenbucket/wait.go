package tokenbucket

import (
	"context"
	"math"
	"runtime"
	"time"
)

// Waiting is tuned for launch-path latencies: most waits are a few token
// intervals (microseconds), far below what a timer can deliver (a Go timer
// wakes tens of microseconds late, more under load), so short waits spin.
// Long waits park on a timer, waking early by timerSlack to spin the rest.
const (
	spinMin        = 50 * time.Nanosecond
	spinMax        = 10 * time.Microsecond
	blockThreshold = 100 * time.Microsecond
	timerSlack     = 50 * time.Microsecond
)

// Wait takes n tokens, blocking until they are available or ctx is done.
// On cancellation it returns ctx.Err() and refunds what it had reserved, so
// a cancelled Wait costs the bucket nothing. A ctx that is already done
// takes nothing. NaN or infinite n returns ErrInvalidAmount.
//
// Wait does not give up early when ctx's deadline falls before the tokens
// are due: the bucket's clock may be injected and need not be wall time.
func (b *Bucket) Wait(ctx context.Context, n float64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return ErrInvalidAmount
	}
	due, now := b.reserve(n)
	if due <= now {
		return nil
	}
	if err := b.sleepUntil(ctx, due); err != nil {
		b.refundCharge(n)
		return err
	}
	return nil
}

// refundCharge gives back exactly the nanoseconds reserve charged for n
// (rounded up), where Refund, for amounts it did not charge itself, rounds
// down: a cancelled Wait must cost the bucket nothing, not a nanosecond per
// wait, which is a whole token after a few waits of fractional costs.
func (b *Bucket) refundCharge(n float64) {
	now := b.now()
	for {
		s, p := b.load()
		tat := s >> genBits
		if tat <= now {
			return // already full
		}
		next := max(tat-p.charge(n), now)
		if b.state.CompareAndSwap(s, next<<genBits|p.gen) {
			return
		}
	}
}

// sleepUntil returns once the bucket's clock reaches due, or ctx.Err() once
// ctx is done.
func (b *Bucket) sleepUntil(ctx context.Context, due int64) error {
	done := ctx.Done() // nil for a context that is never done: select falls through
	backoff := spinMin
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		rem := time.Duration(due - b.now())
		if rem <= 0 {
			return nil
		}
		if rem > blockThreshold {
			d := rem - timerSlack
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-done:
				return ctx.Err()
			case <-timer.C:
			}
			continue
		}
		select {
		case <-done:
			return ctx.Err()
		default:
		}
		spin(min(backoff, rem))
		if backoff < spinMax {
			backoff = min(2*backoff, spinMax)
		} else {
			// Spinning at the cap: let other goroutines (perhaps the one
			// that will refund tokens) have the processor.
			runtime.Gosched()
		}
	}
}

// spin busy-waits for about d of real time. It uses the real monotonic clock,
// not the bucket's, so that a frozen test clock cannot trap it between
// cancellation checks.
func spin(d time.Duration) {
	end := monotonic() + int64(d)
	for monotonic() < end {
		pause()
	}
}
