package smpart

import (
	"errors"
	"slices"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// A pool's commons is where its unpartitioned tenants' work runs. While no
// partition holds an SM it is the whole device, through the primary
// context, as if there were no commons; once partitions exist it is green
// contexts over the SMs none of them holds (Split.Commons), so that no
// work of an unpartitioned tenant lands on a partition's SMs. On the H200
// a plain tenant on the primary context ran blocks on every SM, a 16-SM
// partition's included, and took that partition's P99 from 61 µs to
// 1.45 ms.
//
// The commons is a Partition whose layouts follow the split rather than a
// tenant's Reshape: Follow switches it to the layout over the SMs free
// now, building that layout on first use, and hands every stream over as
// Reshape does. Its tenants share its streams' lists, its slots and its
// layouts; each of them gets streams of its own from NewStream.

// wholeKey names the commons' layout over the whole device.
const wholeKey = "whole"

// maxCommonsLayouts bounds the layouts a commons keeps built: the few
// shapes a server's partitions take (a Reshape between two sizes, a class
// made and closed) switch without building anything after the first time.
const maxCommonsLayouts = 8

// NewCommons makes d's commons, on the whole device.
func (d *Device) NewCommons() (*Partition, error) {
	p := &Partition{drv: d.drv, dev: d, done: make(chan struct{}), commons: true}
	l := p.wholeLayout()
	p.layouts = []*layout{l}
	p.cur.Store(l)
	return p, nil
}

// wholeLayout is the commons' layout over the whole device: the primary
// context, which any number of threads may have current, so its one slot
// is shared (any) and nothing waits for it.
func (p *Partition) wholeLayout() *layout {
	primary := p.dev.Primary()
	l := &layout{ctx: primary, sms: p.dev.SMs(), key: wholeKey}
	l.any = &Slot{l: l, ctx: primary}
	none := []*Slot{}
	l.slots.all.Store(&none)
	l.slots.max.Store(1) // Limit: one context, shared (DoEach runs once)
	retired := make(chan struct{})
	l.retired.Store(&retired)
	return l
}

// CommonsKey names the commons' layout over groups idx and, if rem, the
// remainder, by the name its green contexts are kept under (greenKey), or
// the whole device.
func (s *Split) CommonsKey(idx []int, rem, whole bool) string {
	if whole {
		return wholeKey
	}
	return string(s.greenKey(idx, rem))
}

// Follow makes the commons' current layout the one named key, over
// the SMs set (none for the whole device), building it first if it has
// not been built or was let go. The streams are handed over as Reshape
// hands them (swap is told each stream's old and new handle), and Layout
// changes, so that a graph instantiated before is known stale. The caller
// holds back every call that could queue work on the commons' streams
// meanwhile (the tenants' life locks, paused). keep says a tenant that
// could not be held back (one closing) may still use streams of the
// layouts built: none is let go now.
func (p *Partition) Follow(key string, set SMSet, swap func(old, new cuda.Stream), keep bool) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	old := p.cur.Load()
	if old.key == key {
		p.mu.Unlock()
		return nil
	}
	i := slices.IndexFunc(p.layouts, func(l *layout) bool { return l.key == key })
	var next *layout
	if i >= 0 {
		next = p.layouts[i]
	} else {
		var err error
		if next, err = p.buildCommons(key, set, len(old.streams)); err != nil {
			p.mu.Unlock()
			return err
		}
		p.layouts = append(p.layouts, next)
	}
	if err := p.handOver(old, next, swap); err != nil {
		p.mu.Unlock()
		return err
	}
	next.stamp = p.epoch.Add(1)
	var errs []error
	if !next.covers(old) {
		// The work queued before still runs on SMs a partition now holds:
		// GaveDrained tells that partition when it has run.
		errs = append(errs, p.markGave(old))
	}
	var gone []*layout
	if !keep {
		gone = p.evict(key == wholeKey)
	}
	p.mu.Unlock()
	for _, l := range gone { // waits for their streams: outside the lock
		errs = append(errs, l.destroy(p.dev))
	}
	return errors.Join(errs...)
}

// buildCommons builds the commons' layout over set with n streams. The
// caller holds p.mu.
func (p *Partition) buildCommons(key string, set SMSet, n int) (*layout, error) {
	var l *layout
	var err error
	if key == wholeKey {
		l = p.wholeLayout()
	} else if l, err = newLayout(p.dev, set, 0); err == nil {
		l.key, l.set = key, set
		l.slots.max.Store(MaxSlots) // its tenants share them; made on demand
		// newLayout made a first stream; the commons' streams are all
		// its tenants'.
		err = p.drv.StreamDestroy(p.dev.Primary(), l.streams[0])
		l.streams = l.streams[:0]
	}
	for err == nil && len(l.streams) < n {
		var s cuda.Stream
		if s, err = p.layoutStream(l, 0); err == nil {
			l.streams = append(l.streams, s)
		}
	}
	if err != nil && l != nil {
		return nil, errors.Join(err, l.destroy(p.dev))
	}
	return l, err
}

// covers reports whether l runs on every SM old ran on (both the
// commons').
func (l *layout) covers(old *layout) bool {
	switch {
	case l.key == wholeKey:
		return true
	case old.key == wholeKey || old.set.rem && !l.set.rem:
		return false
	}
	for _, i := range old.set.idx {
		if _, ok := slices.BinarySearch(l.set.idx, i); !ok {
			return false
		}
	}
	return true
}

// markGave records an event at the end of the work queued on each of
// old's streams, in place of those an earlier move left (each stream of
// the layout after old waits for that work, so these come after it too).
// The caller holds p.mu and has held every call on the commons back.
func (p *Partition) markGave(old *layout) error {
	err := p.dropGave()
	primary := p.dev.Primary()
	for _, st := range old.streams {
		e, cerr := p.drv.EventCreate(primary, cuda.EventDisableTiming)
		if cerr != nil {
			return errors.Join(err, cerr) // GaveDrained answers for those made
		}
		p.gave = append(p.gave, e)
		p.setPend()
		err = errors.Join(err, p.drv.EventRecord(primary, e, st))
	}
	return err
}

// dropGave destroys the events markGave recorded. The caller holds p.mu.
func (p *Partition) dropGave() error {
	var err error
	for _, e := range p.gave {
		err = errors.Join(err, p.drv.EventDestroy(p.dev.Primary(), e))
	}
	p.gave = p.gave[:0]
	return err
}

// layoutStream makes a stream of l: of the primary context on the
// commons' whole device, else of l's green context.
func (p *Partition) layoutStream(l *layout, priority int) (cuda.Stream, error) {
	if l.green == 0 {
		return p.drv.StreamCreate(p.dev.Primary(), cuda.StreamNonBlocking)
	}
	return p.drv.GreenCtxStreamCreate(l.green, cuda.StreamNonBlocking, priority)
}

// evict unlists the layouts past maxCommonsLayouts that were current
// longest ago, neither current nor the whole device's, with no slot held,
// for the caller to destroy; all of them where all (back on the whole
// device, no partition is left to shape them). The caller holds p.mu.
func (p *Partition) evict(all bool) (gone []*layout) {
	cur := p.cur.Load()
	for len(p.layouts) > maxCommonsLayouts || all && len(p.layouts) > 1 {
		k := -1
		for i, l := range p.layouts {
			if l != cur && l.key != wholeKey && l.idle() && (k < 0 || l.stamp < p.layouts[k].stamp) {
				k = i
			}
		}
		if k < 0 {
			return gone
		}
		gone = append(gone, p.layouts[k])
		p.layouts = slices.Delete(p.layouts, k, k+1)
	}
	return gone
}

// idle reports whether no slot of l is held or waited for.
func (l *layout) idle() bool {
	made := uint(l.slots.made.Load())
	return l.slots.nq.Load() == 0 && l.slots.free.Load() == (uint64(1)<<made)-1
}

// Whole reports whether the commons runs on the whole device now (no
// partition holds an SM).
func (p *Partition) Whole() bool { return p.cur.Load().any != nil }

// Key names the commons' current layout (CommonsKey).
func (p *Partition) Key() string { return p.cur.Load().key }
