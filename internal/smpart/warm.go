package smpart

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Warm-ups: a function of a tenant's run in a green context before the
// context serves one of its requests (fcsp.WithWarmup, Tenant.DoEach), so
// that what a library does on its first use in a context (cuBLAS loads
// its kernels there, and a load waits for the whole device) and the
// context's own making (1.2 ms on the H200) never land on a request. A
// tenant's own partition is warmed whole when it is made: every slot of
// every layout. The commons is shared by every unpartitioned tenant and
// grows slots on demand, so each slot records which warm-ups (by id) have
// run in it: the commons' current layout is warmed for each such tenant
// when it is made and after each move, and a slot that escaped both (made
// on demand later, or held by another tenant meanwhile) is warmed by the
// Do that takes it, before that Do's function runs (Slot.WarmOnce).

// warmSet is the ids of the warm-ups run in a slot's context: replaced
// whole (copy on write), since a Do reads it without a lock while a
// closing tenant's Forget may drop its id.
type warmSet struct{ ids atomic.Pointer[[]uint64] }

func (w *warmSet) has(id uint64) bool {
	if p := w.ids.Load(); p != nil {
		return slices.Contains(*p, id)
	}
	return false
}

// add records id; false if it was there (another run has it).
func (w *warmSet) add(id uint64) bool {
	for {
		old := w.ids.Load()
		var ids []uint64
		if old != nil {
			if slices.Contains(*old, id) {
				return false
			}
			ids = slices.Clone(*old)
		}
		ids = append(ids, id)
		if w.ids.CompareAndSwap(old, &ids) {
			return true
		}
	}
}

// drop forgets id.
func (w *warmSet) drop(id uint64) {
	for {
		old := w.ids.Load()
		if old == nil || !slices.Contains(*old, id) {
			return
		}
		ids := slices.DeleteFunc(slices.Clone(*old), func(x uint64) bool { return x == id })
		if w.ids.CompareAndSwap(old, &ids) {
			return
		}
	}
}

// Warmed reports whether warm-up id has run in the slot's context.
func (s *Slot) Warmed(id uint64) bool { return s.warmed.has(id) }

// SMs is how many SMs the slot's context holds (its layout's).
func (s *Slot) SMs() int { return s.l.sms }

// WarmOnce runs f, the warm-up id, in the slot's context unless it has run
// there (or is running: the whole device's slot is shared), on behalf of
// the caller, which holds the slot and has locked its thread. A failed run
// leaves the slot unwarmed, to be tried again by the next taker. id 0 is
// no warm-up of record: f runs each time.
func (s *Slot) WarmOnce(id uint64, f func(ctx cuda.Context, sms int) error) error {
	if id == 0 {
		return f(s.ctx, s.l.sms)
	}
	if !s.warmed.add(id) {
		return nil
	}
	if err := f(s.ctx, s.l.sms); err != nil {
		s.warmed.drop(id)
		return err
	}
	return nil
}

// Warm runs f, the warm-up id, on the calling thread (which the caller has
// locked), in the contexts of every layout (all) or of the current one
// where it has not run: every slot made and free, and new ones until it
// has run in n. f is told the layout's SMs (a library sizes its kernels by them);
// it makes the context it is given current and puts the thread's back.
// Each slot is held while f runs in it, so no Do takes it half-warmed; one
// held elsewhere meanwhile is left to the Do that takes it next
// (WarmOnce). id 0 records nothing (DoEach, which may be run again).
func (p *Partition) Warm(id uint64, n int, all bool, f func(ctx cuda.Context, sms int) error) error {
	p.mu.Lock()
	ls := []*layout{p.cur.Load()}
	if all {
		ls = slices.Clone(p.layouts)
	}
	p.mu.Unlock()
	return p.warm(ls, id, n, f)
}

// WarmOthers is Warm, unrecorded, of every layout but the current one: a
// reshapable tenant's other sizes (Tenant.DoEach runs the current one's
// contexts itself).
func (p *Partition) WarmOthers(n int, f func(ctx cuda.Context, sms int) error) error {
	p.mu.Lock()
	cur := p.cur.Load()
	var others []*layout
	for _, l := range p.layouts {
		if l != cur {
			others = append(others, l)
		}
	}
	p.mu.Unlock()
	return p.warm(others, 0, n, f)
}

func (p *Partition) warm(ls []*layout, id uint64, n int, f func(ctx cuda.Context, sms int) error) error {
	for _, l := range ls {
		if err := p.warmLayout(l, id, n, f); err != nil {
			return fmt.Errorf("warming the %d-SM layout: %w", l.sms, err)
		}
	}
	return nil
}

// warmLayout warms l's slots one at a time, so that a commons' other
// tenants keep the rest meanwhile: each made one that is free, then new
// ones until n are warm (l's limit allowing).
func (p *Partition) warmLayout(l *layout, id uint64, n int, f func(ctx cuda.Context, sms int) error) error {
	if l.any != nil { // the commons' whole device: one context, shared
		return l.any.WarmOnce(id, f)
	}
	warm := 0
	for _, s := range *l.slots.all.Load() {
		if id != 0 && s.Warmed(id) {
			warm++
			continue
		}
		if !l.slots.takeIdx(s.idx) {
			continue // held: its next taker warms it
		}
		err := s.WarmOnce(id, f)
		s.Release()
		if err != nil {
			return err
		}
		warm++
	}
	for ; warm < n; warm++ {
		s, err := p.newSlot(l)
		if err != nil || s == nil {
			return err // nil: l's limit
		}
		err = s.WarmOnce(id, f)
		s.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// Forget drops warm-up id from the record of every slot (its tenant has
// closed): the commons outlives its tenants.
func (p *Partition) Forget(id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.layouts {
		if l.any != nil {
			l.any.warmed.drop(id)
		}
		for _, s := range *l.slots.all.Load() {
			s.warmed.drop(id)
		}
	}
}
