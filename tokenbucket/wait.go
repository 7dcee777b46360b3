package tokenbucket

import (
	"context"
	"errors"
	"fmt"
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
// As golang.org/x/time/rate does, Wait fails at once, taking nothing, when
// ctx's deadline falls before the tokens are due: the error matches
// context.DeadlineExceeded and says the wait would exceed the deadline.
// The bucket's clock is taken to advance at the rate of real time.
func (b *Bucket) Wait(ctx context.Context, n float64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return ErrInvalidAmount
	}
	due, now, k := b.reserveAt(n, b.clock())
	if due <= now {
		return nil
	}
	if err := beforeDeadline(ctx, due-now); err != nil {
		b.giveBack(k)
		return err
	}
	if _, err := b.sleepUntil(ctx, due, nil); err != nil {
		b.giveBack(k)
		return err
	}
	return nil
}

// errWouldExceed matches context.DeadlineExceeded, as x/time/rate's does.
type errWouldExceed struct{ wait, left time.Duration }

func (e errWouldExceed) Error() string {
	return fmt.Sprintf("a wait of %v would exceed context deadline (%v left)", e.wait, e.left)
}

func (errWouldExceed) Is(target error) bool { return target == context.DeadlineExceeded }

// beforeDeadline returns an error matching context.DeadlineExceeded if a
// wait of ns nanoseconds cannot end before ctx's deadline.
func beforeDeadline(ctx context.Context, ns int64) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	if left := time.Until(dl); time.Duration(ns) > left {
		return errWouldExceed{wait: time.Duration(ns), left: left}
	}
	return nil
}

// errWoken is returned by sleepUntil when wake was closed.
var errWoken = errors.New("tokenbucket: woken")

// sleepUntil returns once the bucket's clock reaches due, ctx.Err() once
// ctx is done, or errWoken once wake (nil: never) is closed. It returns the
// bucket time it last read.
func (b *Bucket) sleepUntil(ctx context.Context, due int64, wake <-chan struct{}) (int64, error) {
	done := ctx.Done() // nil for a context that is never done: select falls through
	backoff := spinMin
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := b.now()
		rem := time.Duration(due - now)
		if rem <= 0 {
			return now, nil
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
				return now, ctx.Err()
			case <-wake:
				return now, errWoken
			case <-timer.C:
			}
			continue
		}
		select {
		case <-done:
			return now, ctx.Err()
		case <-wake:
			return now, errWoken
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
