package smmove

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/life"
	"github.com/fcsp-go/fcsp-go/internal/nap"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// ErrSteered refuses a Reshape by hand of a tenant whose SMs the pool's
// controller moves (the latency class and its rest, once both exist).
var ErrSteered = errors.New("its SMs follow the latency class's load: the pool's controller reshapes it")

// Reshape switches m to its layout of sms SMs (Tenant.Reshape): a growth
// first claims the SMs it adds, moves the commons off them and waits for
// the work queued there (AwaitHandOff), its own calls going on meanwhile;
// then m's calls are held while the layout switches; a shrink's commons
// moves onto what it gave after m's calls are let go. On an error nothing
// has changed, but where the commons already left a growth's claim: it
// comes back with the next change.
func (e *Engine) Reshape(ctx context.Context, m Member, sms int) error {
	return e.run(ctx, func() error {
		if e.steered(m) {
			return fmt.Errorf("%w: %s", errs.ErrInvalidArgument, ErrSteered)
		}
		return e.reshape(ctx, m, sms, true)
	})
}

// steered reports whether the controller moves m's SMs.
func (e *Engine) steered(m Member) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.steer != nil && (e.steer.lat == m || e.steer.rest == m)
}

// reshape is Reshape's step, under the move lock (errAgain: let go). A
// growth waits for the hand-over (AwaitHandOff) where wait says so.
func (e *Engine) reshape(ctx context.Context, m Member, sms int, wait bool) (err error) {
	pl := m.Place()
	from := pl.SMs()
	start := time.Now()
	if sms > from {
		if err := place.Claim(pl, sms); err != nil {
			return err
		}
		defer func() {
			switch err {
			case nil, errDone: // switched: the claim is held
			case errAgain:
				place.Unclaim(pl) // claimed again when the step starts again
			default:
				e.unclaim(ctx, pl)
			}
		}()
		if err := e.follow(ctx, false); err != nil {
			return err
		}
		if wait { // else GrowAtOnce: each SM passes as the work queued there leaves it
			if err := e.AwaitHandOff(ctx, m); err != nil {
				return err
			}
		}
	}
	handed := time.Now()
	held, err := e.hold(ctx, []Member{m}, life.HoldCalls)
	if err != nil {
		return err
	}
	if len(held) == 0 {
		return errs.ErrClosed
	}
	paused := time.Now() // the log line tells the wait for calls from the switch
	err = place.Reshape(pl, sms, m.Swapper())
	release(held)
	if err != nil {
		return err // smpart.ErrClosed is errs.ErrClosed: one identity
	}
	if err := m.Resized(sms); err != nil {
		return fmt.Errorf("resizing its launch-rate limit: %w", err)
	}
	// A shrink's commons moves onto what it gave, after its calls are let
	// go (rule 2); a step started again after giving way finds its switch
	// made and still moves it. Where this fails the commons stays where it
	// was, off every partition; the next change moves it.
	if err := e.follow(ctx, false); err == errAgain {
		return errDone
	}
	if from != sms {
		e.log.Debug("tenant reshaped", "tenant", m.Name(), "from_sms", from, "sms", sms, "took", time.Since(start),
			"handoff_wait", handed.Sub(start), "calls_wait", paused.Sub(handed))
	}
	return nil
}

// unclaim gives back what a growth claimed and no switch used, and moves
// the commons back onto it: a clean-up after the growth's own wait ended,
// so bounded apart (the hand-over's bound), not by ctx; where the
// unpartitioned tenants' calls outlast it the next change moves them.
func (e *Engine) unclaim(ctx context.Context, pl place.Placement) {
	place.Unclaim(pl)
	back, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.handOff)
	defer cancel()
	if err := e.follow(back, false); err == errAgain {
		_ = e.lock(context.Background()) // the caller holds the lock on its error
	}
}

// givers recycles AwaitHandOff's lists: NewTenant waits for each
// partition made, and the list was garbage of every one.
var givers = sync.Pool{New: func() any { return new([]Member) }}

// AwaitHandOff waits, at most the engine's bound (HandOffMax), until the
// work queued before SMs changed hands has run: the other partitions',
// queued before their last Reshape gave SMs up, and the commons', queued
// before its last move left SMs; ctx's error, nothing changed, if ctx ends
// first. Its callers (a growth, under the move lock; NewTenant, before it
// hands a partition out) hold none of m's calls: they go on, on the SMs m
// holds, while it waits.
func (e *Engine) AwaitHandOff(ctx context.Context, m Member) error {
	list := givers.Get().(*[]Member)
	gs := e.partitioned(m, (*list)[:0])
	defer func() {
		clear(gs) // a pooled list must not keep closed tenants reachable
		*list = gs[:0]
		givers.Put(list)
	}()
	gs = slices.DeleteFunc(gs, gaveDrained)
	commons := !e.commonsGaveDrained()
	for deadline := time.Now().Add(e.handOff); (len(gs) > 0 || commons) && time.Now().Before(deadline); {
		if err := ctx.Err(); err != nil {
			return err
		}
		nap.Sleep(handOffPoll) // a Go timer would poll every millisecond (internal/nap)
		gs = slices.DeleteFunc(gs, gaveDrained)
		commons = commons && !e.commonsGaveDrained()
	}
	return nil
}
