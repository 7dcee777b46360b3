// Package smctl decides how many SMs a latency class holds, from what the
// SDK sees of it: its requests in flight and how long they take. The pool
// (fcsp, steer.go) samples, asks, and moves the SMs; this package only
// decides, so that its rules are tested without a device or a clock.
//
// What the load asks for: one step per request in flight past the first,
// from Min at one request to the fit at FullAt; and, for two requests or
// more, at least what they need as learnt while the controller runs
// (model.go): at each size it keeps what a request needed there (its P99
// times the SMs over the requests it shared them with, Sample.Load) and
// what one alone took, and a load asks for at least the smallest size
// whose predicted P99 for its requests in flight meets the target. So a
// burst's first move goes to the size it needs in one step, where the
// steps per request read a burst smaller than the class's concurrency as
// asking for less and the P99 then climbed a step a move (measured on an
// H100, run D1: 16 -> 24 -> 32 -> 40 -> 48, a move and its drain each).
//
// The target is absolute (Config.Target), or relative to the class's own
// P99 at Max under about its heaviest load measured there
// (RelativeTarget), which a server can state without knowing the card;
// until that is measured a burst of two requests or more takes the fit,
// so that it is, and no rule reads the P99. Controller.Target says which
// target holds now; the pool counts the requests over it (Sample.Slow).
//
// The rules, in order:
//   - A move still draining (work queued before it still running on the
//     SMs it moved) blocks every decision: nothing moves until it is done.
//   - Moves are at least MinGap apart (a bounded rate).
//   - Grow at once to what the load asks (above), and one step more
//     while the recent P99 is
//     over target, a request is in flight (with none, more SMs would
//     serve no one: the P99 is the tail of a burst already over) and at
//     least two recent requests missed the target, their starts further
//     apart than one request and a stall (Target + stallMax): one slow
//     request alone, or every request in flight slowed at one instant, is
//     a stall of the host (a collection, a preempted process), which SMs
//     do not cure.
//     A burst's first requests see the class grow within a sample or two:
//     while the requests in flight still rise, growth on load waits (at
//     most settle samples) for the rest of the burst, so that it grows
//     once to what the whole burst asks, not first to what its first two
//     requests ask (measured on an H100, run D1: a burst grew 16 -> 24
//     on two requests, then 24 -> 48 a move's 6 ms later).
//   - Shrink to what the load asks, in one move, only after it has asked
//     for less for Hold and the P99 is within target (or nothing is in
//     flight): a lull between requests gives nothing back, and a burst
//     that ended gives everything back a Hold later, not a step a Hold.
//     A load that asks for the floor (one request in flight at most: the
//     burst is over) waits IdleHold instead, where set: the throughput
//     class runs on fewer SMs meanwhile (on an H100, run H1, a 50 ms hold
//     cost the batch about 7% of each 300 ms quiet phase), while a load
//     that still asks for more than the floor keeps the longer Hold, so
//     that a burst's own ebb and flow does not move SMs back and forth.
//   - Trim what a full load was given but does not need: while the load
//     asks for all the class may grow to (its fit, Max at first), the
//     last move is a Hold old, and the recent P99 of enough requests is
//     under trimBelow (85%) of target with none over, and would still be
//     under trimBelow of target were it to grow as the SMs fall (P99 x
//     fit/step: a closed loop's throughput falls about as fast as its
//     SMs), the fit falls a step and the class with it (measured on an
//     H100, run E1: at 450 µs a 32-SM P99 of 380 µs, in 85%, tried 24 in
//     every burst and came back with a 1-3 ms tail). The step's margin is
//     the one the size it leaves needs: a 20 ms window's P99 beside a
//     throughput class moves more than the SMs say (run J1: 279 µs at 48
//     SMs, 335 scaled to 40, was 382 at 40, over the 367 µs target), and
//     each trim that lands at the edge of the target grows back, waiting
//     for a kernel of the throughput class on fewer SMs (2.2-2.7 ms
//     against its 1.45 at 116). A P99 over target at the fit raises it
//     a step again, and the size that failed is tried again only after a
//     back-off (retryFirst, 1 s, doubling while the same size fails again,
//     at most retryMax, 30 s): a class whose target needs fewer SMs than
//     Max takes fewer for its bursts, and the throughput class keeps the
//     rest; one unlucky verdict costs a burst or two, not the next 30 s
//     (measured on an H100, run A2: one failed trim at 450 µs held the
//     class at 48 SMs for the rest of the run, batch 89.0% of split16's
//     where the trim that held gave 90.4%).
//   - Never below Min, never above Max.
package smctl

import (
	"fmt"
	"time"
)

// Config is a latency class's bounds and the controller's pace.
type Config struct {
	Min, Max int           // SMs, multiples of Unit
	Unit     int           // the split's group
	Target   time.Duration // the P99 a request should meet; 0 with RelativeTarget
	// RelativeTarget, in place of Target, is the target as a factor (at
	// least 1) of the class's P99 at Max under the heaviest load measured
	// there (Controller.Target says what it is now; 0 until measured).
	RelativeTarget float64
	FullAt         int           // requests in flight that ask for Max before anything is measured (a class's concurrency)
	Hold           time.Duration // how long less must be asked before a shrink
	IdleHold       time.Duration // how long the floor must be asked before a shrink to it: a burst that ended (0: Hold)
	MinGap         time.Duration // the least time between two moves
}

// Sample is what the pool saw of the class at one instant.
type Sample struct {
	At       time.Time
	SMs      int           // held now
	InFlight int           // requests in flight (the class's Dos and Synchronizes under way)
	P99      time.Duration // over the recent requests; 0: none finished
	Slow     int           // recent requests over the target (Controller.Target)
	Spread   time.Duration // how far apart the first and the last of the Slow requests started
	Requests int           // recent requests (those the P99 is of)
	// Load is how many requests the recent ones shared the SMs with, on
	// average: their times summed over the span from the first's start
	// to the last's end (Little's law). 0: not measured, InFlight is
	// taken instead.
	Load     float64
	Rising   bool // more in flight than at the sample before: a burst still arriving
	Draining bool // the last move's old layouts still run work
}

// Move is a decision: SMs to hold (== Sample.SMs: stay) and why, in words
// (Reason, with the figures) and as one of a few kinds (a metric's label).
type Move struct {
	SMs    int
	Reason string
	Kind   Kind
}

// Kind is which rule made a move.
type Kind int

const (
	Stay     Kind = iota // no move
	GrowLoad             // more requests in flight than the SMs held were sized for
	GrowP99              // the recent P99 over target (whatever the load asked)
	Shrink               // the load asked for less for Hold, the P99 within target or nothing in flight
	Trim                 // a full load's P99 well within target at the fit: the fit falls a step
)

// String is the kind as a metric's label value.
func (k Kind) String() string {
	switch k {
	case Stay:
		return "stay"
	case GrowLoad:
		return "grow_load"
	case GrowP99:
		return "grow_p99"
	case Shrink:
		return "shrink"
	case Trim:
		return "trim"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// minSlow is the fewest requests over target that make a tail: a lone one
// is a stall of the host, not of the SMs.
const minSlow = 2

// stallMax is the longest host stall (a collection's pause, the process
// preempted) the tail rule tells from too few SMs: a stall slows every
// request in flight when it begins and every one that starts during it,
// so their starts lie within a request's time (about the target) plus
// the stall; a tail of too few SMs spreads over the whole window.
const stallMax = 2 * time.Millisecond

// settle is the most samples growth on load waits while the requests in
// flight still rise.
const settle = 2

// The trim rule's constants: the P99, scaled to the step's SMs, must be
// under trimBelow of target, over at least
// trimRequests requests (a P99 of fewer is a guess); a size
// found over target is tried again retryFirst later, twice that after a
// second failure, and so on up to retryMax.
const (
	trimBelow    = 0.85
	trimRequests = 64
	retryFirst   = time.Second
	retryMax     = 30 * time.Second
)

// hold is how long less must be asked before a shrink to want: IdleHold
// to the floor where set, else Hold.
func (cfg Config) hold(want int) time.Duration {
	if want == cfg.Min && cfg.IdleHold > 0 {
		return cfg.IdleHold
	}
	return cfg.Hold
}

// Controller keeps what the rules need between samples. Not safe for
// concurrent use: the pool's one controller goroutine calls it.
type Controller struct {
	cfg      Config
	lastMove time.Time
	lowSince time.Time     // when the load began asking for less; zero: it does not
	rising   int           // samples in a row the load has waited on a rising count
	fit      int           // the most the load asks for (Max until a trim)
	failed   int           // the last size a full load was over target at; 0: none
	retryAt  time.Time     // when a step down to failed or below may be tried again
	backoff  time.Duration // the wait that set retryAt
	model    model         // what a request needed at each size (model.go)
}

// New checks cfg and makes a controller.
func New(cfg Config) (*Controller, error) {
	switch {
	case cfg.Unit <= 0 || cfg.Min <= 0 || cfg.Min%cfg.Unit != 0 || cfg.Max%cfg.Unit != 0 || cfg.Max < cfg.Min:
		return nil, fmt.Errorf("bounds %d..%d SMs: want multiples of %d, the least first", cfg.Min, cfg.Max, cfg.Unit)
	case cfg.Target != 0 && cfg.RelativeTarget != 0:
		return nil, fmt.Errorf("target %v and relative target %v: want one of them", cfg.Target, cfg.RelativeTarget)
	case cfg.RelativeTarget != 0 && !(cfg.RelativeTarget >= 1 && cfg.RelativeTarget <= maxRelative):
		return nil, fmt.Errorf("relative target %v: want a factor of the P99 at Max in [1, %v]", cfg.RelativeTarget, maxRelative)
	case cfg.RelativeTarget == 0 && cfg.Target <= 0:
		return nil, fmt.Errorf("target %v: want a positive P99 (or a relative target)", cfg.Target)
	}
	if cfg.FullAt < 2 {
		cfg.FullAt = 2
	}
	return &Controller{cfg: cfg, fit: cfg.Max, model: newModel(cfg)}, nil
}

// maxRelative is the largest relative target: a P99 a thousand times the
// class's best is no target.
const maxRelative = 1000

// Target is the P99 a request should meet now: Config.Target, or under a
// relative target that factor of the P99 at Max measured so far; 0 while
// none is measured (no rule then reads the P99). The pool counts the
// recent requests over it (Sample.Slow).
func (c *Controller) Target() time.Duration {
	if c.cfg.Target > 0 {
		return c.cfg.Target
	}
	if c.model.ref == 0 {
		return 0
	}
	return time.Duration(c.cfg.RelativeTarget * float64(c.model.ref))
}

// Fit is the most SMs the load asks for now: Max until a trim.
func (c *Controller) Fit() int { return c.fit }

// Config is the controller's configuration.
func (c *Controller) Config() Config { return c.cfg }

// want is the size the load asks for, and the P99 predicted there (0:
// not predicted). One step per request in flight past the first, from Min
// at one request to the fit at FullAt, rounded up to whole units; and,
// for two requests or more once anything is measured, at least the
// smallest size up to the fit whose predicted P99 for them meets the
// target (the fit where none does). Under a relative target not yet
// measured, two requests or more ask for the fit, so that it is.
func (c *Controller) want(s Sample, target time.Duration) (int, time.Duration) {
	cfg := c.cfg
	n := s.InFlight
	if n <= 1 || c.fit == cfg.Min {
		return cfg.Min, 0
	}
	if target == 0 {
		return c.fit, 0
	}
	steps := (c.fit - cfg.Min) / cfg.Unit
	k := ((n-1)*steps + cfg.FullAt - 2) / (cfg.FullAt - 1) // ceil
	linear := min(cfg.Min+k*cfg.Unit, c.fit)
	if !c.model.known() {
		return linear, 0
	}
	for sms := cfg.Min; sms <= c.fit; sms += cfg.Unit {
		if p := c.model.predict(n, sms); p <= target || sms == c.fit {
			if sms < linear {
				return linear, 0
			}
			return sms, p
		}
	}
	return linear, 0 // unreachable: the loop ends at the fit
}

// trimmable reports whether s shows a full load at the fit well within
// target, long enough after the last move that its requests ran at this
// size, and whether a step down is allowed (above Min, and not to a size
// that failed, or below it, before its back-off ends).
func (c *Controller) trimmable(s Sample, want int, target time.Duration) bool {
	cfg := c.cfg
	down := c.fit - cfg.Unit
	return target > 0 && s.SMs == c.fit && want == c.fit && down >= cfg.Min &&
		s.Slow == 0 && s.Requests >= trimRequests && s.P99 > 0 &&
		// Scaled up to the step's fewer SMs, so under the margin here too.
		float64(scaled(s.P99, c.fit, down)) <= trimBelow*float64(target) &&
		!c.lastMove.IsZero() && s.At.Sub(c.lastMove) >= cfg.Hold &&
		(down > c.failed || !s.At.Before(c.retryAt))
}

// scaled is p99 at from SMs grown as the SMs fall to to: a closed loop's
// throughput falls about as fast as its SMs (the H100's m=64 requests
// lost less on fixed splits: 48 -> 40 -> 32 SMs took their P99 from 300
// to 345 to 380 µs; one window's P99 can lose more, hence the margin).
func scaled(p99 time.Duration, from, to int) time.Duration {
	return p99 * time.Duration(from) / time.Duration(to)
}

// failedAt remembers that sms was over target at, and when it may be
// tried again: retryFirst after a first failure (or one long after the
// last), twice the last wait after a failure of the same size again.
func (c *Controller) failedAt(sms int, at time.Time) {
	if sms == c.failed && at.Sub(c.retryAt) < retryMax {
		c.backoff = min(2*c.backoff, retryMax)
	} else {
		c.backoff = retryFirst
	}
	c.failed, c.retryAt = sms, at.Add(c.backoff)
}

// Decide says what the class should hold after s.
func (c *Controller) Decide(s Sample) Move {
	cfg := c.cfg
	stay := Move{SMs: s.SMs}
	if s.Draining {
		stay.Reason = "a move is draining"
		return stay
	}
	pre := c.Target()
	c.model.observe(s, s.Requests >= obsRequests || pre > 0 && s.P99 > pre && s.Slow >= minSlow && s.Spread > pre+stallMax)
	target := c.Target()
	want, predicted := c.want(s, target)
	over := target > 0 && s.P99 > target && s.InFlight > 0 && s.Slow >= minSlow && s.Spread > target+stallMax
	if over {
		if s.SMs >= c.fit && c.fit < cfg.Max { // the fit was too few: back up a step, and remember
			c.failedAt(s.SMs, s.At)
			c.fit = min(s.SMs+cfg.Unit, cfg.Max)
		}
		want = max(want, s.SMs+cfg.Unit)
	}
	want = min(max(want, cfg.Min), cfg.Max)
	if want < s.SMs {
		if c.lowSince.IsZero() {
			c.lowSince = s.At
		}
	} else {
		c.lowSince = time.Time{}
	}
	if !c.lastMove.IsZero() && s.At.Sub(c.lastMove) < cfg.MinGap {
		stay.Reason = "too soon after the last move"
		return stay
	}
	// A burst still arriving is waited for, so that it grows once to
	// what the whole burst asks, unless it asks for the fit already: the
	// most it may take, which the rest of the burst cannot raise (on an
	// H100, run H1: bursts of 100 ms lost 2 of their first ms waiting).
	if want > s.SMs && want < c.fit && !over && s.Rising && c.rising < settle {
		c.rising++
		stay.Reason = "the load still rises"
		return stay
	}
	c.rising = 0
	switch {
	case want > s.SMs:
		c.lastMove = s.At
		why, kind := fmt.Sprintf("%d requests in flight", s.InFlight), GrowLoad
		if predicted > 0 {
			why += fmt.Sprintf(", P99 %v predicted at %d SMs (target %v)", predicted.Round(time.Microsecond), want, target.Round(time.Microsecond))
		}
		if over {
			why, kind = fmt.Sprintf("P99 %v over the %v target (%d requests over, starts %v apart), %d requests in flight",
				s.P99.Round(time.Microsecond), target.Round(time.Microsecond), s.Slow, s.Spread.Round(time.Microsecond), s.InFlight), GrowP99
		}
		return Move{SMs: want, Reason: "grow: " + why, Kind: kind}
	case c.trimmable(s, want, target):
		c.fit -= cfg.Unit
		c.lastMove = s.At
		return Move{SMs: c.fit, Kind: Trim, Reason: fmt.Sprintf("trim: P99 %v of %d requests within %.0f%% of the %v target at %d SMs, %v scaled to %d, %d requests in flight",
			s.P99.Round(time.Microsecond), s.Requests, 100*trimBelow, target.Round(time.Microsecond), s.SMs, scaled(s.P99, s.SMs, c.fit).Round(time.Microsecond), c.fit, s.InFlight)}
	case want < s.SMs && !over && s.At.Sub(c.lowSince) >= cfg.hold(want):
		c.lastMove = s.At
		c.lowSince = s.At // the next step waits a Hold again
		return Move{SMs: want, Reason: fmt.Sprintf("shrink: %d requests in flight for %v, P99 %v", s.InFlight, cfg.hold(want), s.P99.Round(time.Microsecond)), Kind: Shrink}
	}
	stay.Reason = "holds"
	return stay
}
