package smmove

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/life"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// The commons (internal/smpart, commons.go): while no partition holds an
// SM it is the whole device; once one does, the SMs none holds, so that a
// plain tenant's work never lands on a partition's SMs. It follows the
// partitions: a partition made, closed or reshaped moves it, holding the
// unpartitioned tenants' calls back while their streams are handed over,
// as a Reshape holds a partitioned tenant's.

// Follow moves the commons onto the SMs no partition holds now (making:
// an unpartitioned tenant is being made, which moves it even while none
// exists). Its caller runs under Change, and returns its errAgain as it
// is. Where the move would leave the unpartitioned tenants no SMs,
// ErrInsufficientSMs, nothing moved; from inside one of their Dos,
// ErrInsideDo.
func (e *Engine) Follow(making bool) error { return e.follow(context.Background(), making) }

// FollowNow is Follow as a move of its own (NewTenant's partition, once
// listed, moves the commons off its SMs before it is handed out).
func (e *Engine) FollowNow(ctx context.Context) error {
	if !e.mayFollow() {
		return nil
	}
	return e.run(ctx, func() error { return e.follow(ctx, false) })
}

// mayFollow reports whether the commons may have to move: the split moved
// since it followed, and it serves a tenant (it does not move while it
// serves none). A sample: follow decides under the move lock.
func (e *Engine) mayFollow() bool {
	if e.commons == nil || e.split.Version() == e.followed.Load() {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.members {
		if !place.Partitioned(m.Place()) {
			return true
		}
	}
	return false
}

// Released follows the split after a partition gave its SMs back (its
// tenant closed), unless called from inside a Do of an unpartitioned
// tenant, which the move would wait for: the next change moves it then.
func (e *Engine) Released() {
	if !e.mayFollow() {
		return // nothing moved (a spare kept, say), or no tenant to move
	}
	if plain, _ := e.plainMembers(); insideAny(plain) != nil {
		return
	}
	_ = e.run(context.Background(), func() error { return e.follow(context.Background(), false) })
}

// Abandon forgets a stalled tenant's stream of the commons, whose work
// may never end: no move and no Close of the commons waits for it
// (smpart.Partition.Abandon).
func (e *Engine) Abandon(h cuda.Stream) {
	if e.commons != nil {
		e.commons.Abandon(h)
	}
}

// follow is Follow with ctx ending its wait for the calls in flight. The
// caller holds the move lock (errAgain: let go).
func (e *Engine) follow(ctx context.Context, making bool) error {
	if e.commons == nil {
		return nil
	}
	v := e.split.Version()
	if v == e.followed.Load() {
		return nil // nothing moved since: no garbage for a tenant made and closed
	}
	plain, closing := e.plainMembers()
	if len(plain) == 0 && !making {
		return nil
	}
	idx, rem, whole, _ := e.split.Commons()
	key := e.split.CommonsKey(idx, rem, whole)
	if e.commons.Key() == key {
		e.followed.Store(v)
		return nil
	}
	if !whole && len(idx) == 0 && !rem {
		return ErrNoCommons(len(plain))
	}
	if m := insideAny(plain); m != nil {
		return errInside(m, "an unpartitioned tenant's, whose SMs it would move")
	}
	held, err := e.hold(ctx, plain, life.HoldCalls)
	if err != nil {
		return err
	}
	// A layout is let go only where no wait can be on its streams: every
	// member held, its waits quiet now (a wait begun after this reads the
	// new handles). A closing tenant, not held, still syncs and releases
	// its streams by their old handles.
	keep := closing || len(held) < len(plain) || !quiet(held, life.HoldWaits)
	from := e.commons.SMs()
	err = e.commons.Follow(key, e.split.Resources(idx, rem), swapOf(held), keep)
	release(held)
	if err != nil {
		return fmt.Errorf("moving the unpartitioned tenants' SMs: %w", err)
	}
	e.followed.Store(v)
	sms := e.commons.SMs()
	for _, m := range held {
		_ = m.Resized(sms) // a launch-rate limit follows the SMs; the commons' sizes are the device's
	}
	e.rewarm = append(e.rewarm, held...) // run once the move lock is let go
	e.log.Debug("unpartitioned tenants moved", "from_sms", from, "sms", sms, "tenants", len(held))
	return nil
}

// swapOf is the swap of every stream of ms (Member.Swapper).
func swapOf(ms []Member) func(old, new cuda.Stream) {
	swaps := make([]func(old, new cuda.Stream), len(ms))
	for i, m := range ms {
		swaps[i] = m.Swapper()
	}
	return func(old, new cuda.Stream) {
		for _, swap := range swaps {
			swap(old, new)
		}
	}
}

// CommonsLeft reports whether unpartitioned tenants would have SMs with
// the split as it is now.
func (e *Engine) CommonsLeft() bool {
	if e.commons == nil {
		return true
	}
	idx, rem, whole, _ := e.split.Commons()
	return whole || len(idx) > 0 || rem
}

// ErrNoCommons says why a change would leave n unpartitioned tenants no
// SMs.
func ErrNoCommons(n int) error {
	return fmt.Errorf("%w: unpartitioned tenants run on the SMs no partition holds, and this would leave them none (%d unpartitioned tenant(s)); "+
		"leave SMs free, make one tenant WithRestOfSMs (unpartitioned tenants then share its SMs), or give each class SMs of its own", smpart.ErrInsufficientSMs, n)
}

// PlainCount is how many unpartitioned tenants there are.
func (e *Engine) PlainCount() int {
	plain, _ := e.plainMembers()
	return len(plain)
}

// drained reports whether m's last Reshape's queued work has run;
// gaveDrained, the work on the SMs it gave up.
func drained(m Member) bool     { return place.Drained(m.Place()) }
func gaveDrained(m Member) bool { return place.GaveDrained(m.Place()) }

// commonsGaveDrained reports whether the work the commons' last move left
// on SMs a partition holds now has run (true without a commons).
func (e *Engine) commonsGaveDrained() bool {
	if e.commons == nil {
		return true
	}
	done, err := e.commons.GaveDrained()
	return done || err != nil
}
