package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/fcsp-go/fcsp-go/tokenbucket"
)

// hamiPolling is HAMi-core's published utilization polling period: its
// limits follow NVML samples taken this often.
const hamiPolling = "HAMi-core: SM limit enforced from NVML utilization polled every 120 ms"

// rateLimiter compares tokenbucket with golang.org/x/time/rate: the cost of
// a non-blocking acquire, how close Wait in a loop comes to the configured
// rate, and how soon a rate change takes effect.
func (b *bench) rateLimiter() error {
	// Acquire cost: both set up never to refuse, so the acquire path itself
	// is timed.
	n := b.n(5_000_000, 50_000)
	tb, err := tokenbucket.NewBucket(1e15, 1e15)
	if err != nil {
		return err
	}
	xr := rate.NewLimiter(rate.Limit(1e15), 1<<40)
	refused := errors.New("refused")
	b.logf("rate: %d acquires each", n)
	oursNs, err := timePer(n, func(int) error {
		if !tb.TryAcquire(1) {
			return refused
		}
		return nil
	})
	if err != nil {
		return err
	}
	xrNs, err := timePer(n, func(int) error {
		if !xr.AllowN(time.Now(), 1) {
			return refused
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.addTime(Row{Section: "rate", Metric: "non-blocking acquire (TryAcquire)", Against: "x/time/rate AllowN(time.Now(), 1)",
		Note: fmt.Sprintf("mean of %d, never refused", n)}, oursNs, xrNs)

	// Accuracy: Wait(1) in a loop for a window, burst 1 (a late wake-up is
	// lost, not banked), admitted / configured.
	window := time.Second
	if b.cfg.quick {
		window = 100 * time.Millisecond
	}
	r := b.cfg.rate
	b.logf("rate: Wait in a loop at %g tokens/s for %v, each", r, window)
	ob, err := tokenbucket.NewBucket(r, 1)
	if err != nil {
		return err
	}
	ob.TryAcquire(1) // drain
	oursN := countFor(b.ctx, window, func(ctx context.Context) error { return ob.Wait(ctx, 1) })
	xl := rate.NewLimiter(rate.Limit(r), 1)
	xl.Allow() // drain
	xrN := countFor(b.ctx, window, func(ctx context.Context) error { return xl.WaitN(ctx, 1) })
	want := r * window.Seconds()
	b.add(Row{Section: "rate", Metric: fmt.Sprintf("Wait loop at %g/s, burst 1, %v: admitted/configured", r, window),
		Ours: float64(oursN) / want, Baseline: float64(xrN) / want, Unit: "fraction",
		Against: "x/time/rate WaitN", Note: "1 is exact; ratio > 1: ours closer"})

	// SetRate lag.
	reps := b.n(200, 20)
	b.logf("rate: SetRate lag, %d changes each way", reps)
	raise := func(mk func(r float64) limiter) (summary, error) { return lagRaise(reps, mk) }
	lower := func(mk func(r float64) limiter) (summary, error) { return lagLower(reps, mk) }
	for _, c := range []struct {
		metric string
		lag    func(mk func(r float64) limiter) (summary, error)
		note   string
	}{
		{"SetRate lag, raise 100/s to 1M/s: to first admission", raise, "median; the old rate would admit in <= 10 ms"},
		{"SetRate lag, lower 1M/s to 10k/s: to first refusal", lower, "median; how long the old rate held"},
	} {
		oursS, err := c.lag(newOursLimiter)
		if err != nil {
			return err
		}
		xrS, err := c.lag(newXRateLimiter)
		if err != nil {
			return err
		}
		b.addTime(Row{Section: "rate", Metric: c.metric, Against: "x/time/rate SetLimit",
			Note: fmt.Sprintf("%s; %d changes", c.note, reps), Published: hamiPolling}, oursS.p(50), xrS.p(50))
	}
	return nil
}

// countFor calls wait until window has passed and returns how many calls
// succeeded within it.
func countFor(ctx context.Context, window time.Duration, wait func(context.Context) error) int {
	start := time.Now()
	n := 0
	for time.Since(start) < window {
		if wait(ctx) == nil && time.Since(start) < window {
			n++
		}
	}
	return n
}

// limiter is the part of both limiters the lag rows use.
type limiter struct {
	try     func() bool
	setRate func(float64)
}

func newOursLimiter(r float64) limiter {
	b, err := tokenbucket.NewBucket(r, 1)
	if err != nil {
		panic(err) // the rates here are constants
	}
	return limiter{func() bool { return b.TryAcquire(1) }, func(r float64) { _ = b.SetRate(r) }}
}

func newXRateLimiter(r float64) limiter {
	l := rate.NewLimiter(rate.Limit(r), 1)
	return limiter{func() bool { return l.AllowN(time.Now(), 1) }, func(r float64) { l.SetLimit(rate.Limit(r)) }}
}

// spinLimit bounds every busy loop below, so a limiter that never admits
// cannot hang the run.
const spinLimit = 100 * time.Millisecond

// lagRaise drains a limiter at 100/s (the next token 10 ms away), raises it
// to 1M/s and times SetRate to the first admission, reps times.
func lagRaise(reps int, mk func(r float64) limiter) (summary, error) {
	ns := make([]float64, 0, reps)
	for range reps {
		l := mk(100)
		for l.try() { // drain
		}
		t0 := time.Now()
		l.setRate(1e6)
		for !l.try() {
			if time.Since(t0) > spinLimit {
				return nil, errors.New("no admission 100 ms after raising the rate")
			}
		}
		ns = append(ns, float64(time.Since(t0)))
	}
	return summarize(ns), nil
}

// lagLower saturates a limiter at 1M/s for 1 ms, lowers it to 10k/s and
// times SetRate to the first refusal, reps times.
func lagLower(reps int, mk func(r float64) limiter) (summary, error) {
	ns := make([]float64, 0, reps)
	for range reps {
		l := mk(1e6)
		for end := time.Now().Add(time.Millisecond); time.Now().Before(end); {
			l.try()
		}
		t0 := time.Now()
		l.setRate(1e4)
		for l.try() {
			if time.Since(t0) > spinLimit {
				return nil, errors.New("still admitting 100 ms after lowering the rate")
			}
		}
		ns = append(ns, float64(time.Since(t0)))
	}
	return summarize(ns), nil
}
