package fcsp

import (
	"context"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// The commons: where unpartitioned tenants run (internal/smpart,
// commons.go). While no partition holds an SM it is the whole device; once
// one does, the SMs none holds, so that a plain tenant's work never lands
// on a partition's SMs. It follows the partitions: a partition made,
// closed or reshaped moves it, holding every unpartitioned tenant's calls
// back while their streams are handed over, as a Reshape holds a
// partitioned tenant's.
//
// Lock order (docs/LOCKS.md has all of it): a tenant's reshape, then its
// life lock's pause, then Pool.placeMu, then the unpartitioned tenants'
// pauses, then Pool.mu, then the commons' own lock (smpart.Partition.mu).

// releaseShared gives the commons back a closing tenant's streams, which
// outlive it there (a partition's go with the partition); its calls are
// over.
func (c *tenantCore) releaseShared(s *streamCore) error {
	if c.place.Partitioned() || !s.owned || !s.fromPart { // the whole device's are not owned
		return nil
	}
	return c.place.DestroyStream(cuda.Stream(s.hv.Load()), !s.used.Load())
}

// openCommons makes the pool's commons where the device can be
// partitioned; elsewhere unpartitioned tenants share the whole device.
func (p *Pool) openCommons() error {
	p.plain = p.whole
	if p.split == nil {
		return nil
	}
	var err error
	if p.commons, err = p.dev.NewCommons(); err != nil {
		return err
	}
	p.plain = placement{place.NewCommons(p.commons)}
	return nil
}

// follow moves the commons onto the SMs no partition holds now. It is lazy
// while no unpartitioned tenant exists: making says one is being made,
// which moves it. An unpartitioned tenant needs SMs: where none is free and
// no partition took the rest to share, ErrInsufficientSMs. The caller
// holds placeMu, not mu.
func (p *Pool) follow(making bool) error {
	if p.commons == nil {
		return nil
	}
	v := p.split.Version()
	if v == p.followed.Load() {
		return nil // nothing moved since: no garbage for a tenant made and closed
	}
	plain := p.plainCores()
	if len(plain) == 0 && !making {
		return nil
	}
	idx, rem, whole, _ := p.split.Commons()
	key := p.split.CommonsKey(idx, rem, whole)
	if p.commons.Key() == key {
		p.followed.Store(v)
		return nil
	}
	if !whole && len(idx) == 0 && !rem {
		return errNoCommons(len(plain))
	}
	if err := p.insidePlainDo(); err != nil {
		return err // the pause would wait for this Do
	}
	paused := make([]*tenantCore, 0, len(plain))
	defer func() {
		for _, c := range paused {
			c.life.Resume()
		}
	}()
	for _, c := range plain {
		if c.life.Pause(context.Background()) == nil { // a closing tenant's streams go with it
			paused = append(paused, c)
		}
	}
	streams := map[cuda.Stream][]*streamCore{}
	for _, c := range paused {
		c.mu.Lock()
		for _, s := range c.streams {
			if s.fromPart {
				h := cuda.Stream(s.hv.Load())
				streams[h] = append(streams[h], s)
			}
		}
		c.mu.Unlock()
	}
	from := p.commons.SMs()
	// A closing tenant was not held back: its Close still syncs and
	// releases its streams by their old handles, so no layout goes now.
	err := p.commons.Follow(key, p.split.Resources(idx, rem), func(old, new cuda.Stream) {
		for _, s := range streams[old] {
			s.hv.Store(uintptr(new))
		}
	}, len(paused) < len(plain))
	if err != nil {
		return fmt.Errorf("moving the unpartitioned tenants' SMs: %w", err)
	}
	p.followed.Store(v)
	sms := p.commons.SMs()
	for _, c := range paused {
		_ = c.adm.SetSMs(sms) // a launch-rate limit follows the SMs, as at a Reshape
		p.rewarm(c)           // its warm-up, before its Dos meet the new contexts
	}
	p.log.Debug("unpartitioned tenants moved", "from_sms", from, "sms", sms, "tenants", len(paused))
	return nil
}

// followSplit moves the commons onto the SMs no partition holds now, under
// placeMu; where that would leave the unpartitioned tenants none,
// errNoCommons, nothing moved.
func (p *Pool) followSplit() error {
	if p.commons == nil {
		return nil
	}
	if err := p.lockPlace(); err != nil {
		return err
	}
	defer p.placeMu.Unlock()
	p.mu.Lock()
	plain := p.plainCount()
	left := plain == 0 || p.commonsLeft() // commonsLeft lists the free groups: only where it matters
	p.mu.Unlock()
	if !left {
		return errNoCommons(plain)
	}
	return p.follow(false)
}

// lockPlace takes placeMu. Where another change holds it, that change may
// be a move waiting for the unpartitioned tenants' calls in flight; one of
// them waiting here would never be done: from inside one of their Dos it
// is ErrInsideDo rather than a wait.
func (p *Pool) lockPlace() error {
	if p.placeMu.TryLock() {
		return nil
	}
	if err := p.insidePlainDo(); err != nil {
		return err
	}
	p.placeMu.Lock()
	return nil
}

// insidePlainDo is ErrInsideDo, naming the tenant, on a thread inside a
// Do of an unpartitioned tenant, which a move of the commons waits for.
// It makes no garbage where it finds none: NewTenant comes here.
func (p *Pool) insidePlainDo() error {
	if p.commons == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.tenants {
		if !c.place.Partitioned() && c.checkNotInsideDo() != nil {
			return fmt.Errorf("%w (%s's, an unpartitioned tenant's, whose SMs it would move); call it after that Do returns", ErrInsideDo, tenantName(c.name))
		}
	}
	return nil
}

// errNoCommons says why a change would leave unpartitioned tenants no SMs.
func errNoCommons(plain int) error {
	return fmt.Errorf("%w: unpartitioned tenants run on the SMs no partition holds, and this would leave them none (%d unpartitioned tenant(s)); "+
		"leave SMs free, make one tenant WithRestOfSMs (unpartitioned tenants then share its SMs), or give each class SMs of its own", ErrInsufficientSMs, plain)
}

// plainCores lists the unpartitioned tenants.
func (p *Pool) plainCores() []*tenantCore {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*tenantCore
	for _, c := range p.tenants {
		if !c.place.Partitioned() {
			out = append(out, c)
		}
	}
	return out
}

// commonsLeft reports whether unpartitioned tenants would have SMs with
// the split as it is now. The caller holds mu.
func (p *Pool) commonsLeft() bool {
	if p.commons == nil {
		return true
	}
	idx, rem, whole, _ := p.split.Commons()
	return whole || len(idx) > 0 || rem
}

// plainCount is how many unpartitioned tenants there are. The caller
// holds mu.
func (p *Pool) plainCount() (n int) {
	for _, c := range p.tenants {
		if !c.place.Partitioned() {
			n++
		}
	}
	return n
}

// released lets the commons grow onto SMs a partition gave back (its
// tenant closed): at once, unless this is a Do of an unpartitioned tenant,
// which the move would wait for; the next change then moves it.
func (p *Pool) released() {
	if p.commons == nil || p.split.Version() == p.followed.Load() {
		return // a spare kept, say: nothing moved
	}
	if p.insidePlainDo() != nil {
		return // a move now would wait for this Do
	}
	p.placeMu.Lock()
	defer p.placeMu.Unlock()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		_ = p.follow(false)
	}
}
