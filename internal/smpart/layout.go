package smpart

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// shape is what a reshapable partition knows of its split: the groups it
// may hold, in the order it takes them (its lane: the layout of k groups
// holds the lane's first k), whether every layout includes the split's
// remainder, and how many of the lane's groups it holds now.
type shape struct {
	split   *Split // set once before sharing
	lane    []int  // set once before sharing
	rem     bool   // set once before sharing
	held    int    // guarded by Partition.mu
	claimed int    // guarded by Partition.mu; held, and those Claim took ahead of a growth: the lane's first claimed are the partition's in the split
	rest    bool   // set once before sharing; the partition took the rest (TakeRestLayouts)
	prio    int    // set once before sharing; its streams' priority (TakeLayouts)
}

// TakeLayouts builds a partition that can be reshaped between sizes (SM
// counts, multiples of the group size). It starts at initial (one of
// sizes), holding that many groups; the green contexts of the other sizes
// are built now, from groups that follow its own (free ones first), so
// that Reshape costs no driver work beyond an event and a wait per stream.
// Growing needs the extra groups to be free at the time. Its streams are
// made at priority prio (cuGreenCtxStreamCreate's; 0 the default).
func (s *Split) TakeLayouts(initial int, sizes []int, prio int) (*Partition, error) {
	g := s.GroupSMs()
	sizes = withSize(sizes, initial)
	for _, n := range sizes {
		if err := s.checkSize(n); err != nil {
			return nil, err
		}
	}
	most := sizes[len(sizes)-1] / g
	if most > len(s.groups) {
		return nil, fmt.Errorf("%w: a layout of %d SMs needs %d groups of %d; the split made %d",
			ErrInsufficientSMs, most*g, most, g, len(s.groups))
	}
	s.mu.Lock()
	need, err := s.check(initial)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	var lane, free, taken []int
	for i, u := range s.used {
		switch {
		case !u && len(lane) < need:
			s.used[i] = true
			s.version.Add(1)
			lane = append(lane, i)
		case !u:
			free = append(free, i)
		default:
			taken = append(taken, i)
		}
	}
	s.mu.Unlock()
	lane = append(lane, append(free, taken...)[:most-need]...)
	return s.buildLayouts(&shape{split: s, lane: lane, held: need, claimed: need, prio: prio}, sizes)
}

// TakeRestLayouts is TakeRest for a partition that can shrink: it takes
// every free group and the remainder if free, and builds a layout for each
// of sizes (each of them a whole number of groups plus the remainder it
// got). Shrinking gives up the lowest-numbered groups first, which are the
// ones the partitions taken before it (by TakeLayouts) grow into.
func (s *Split) TakeRestLayouts(sizes []int) (*Partition, error) {
	lane, rem := s.claimRest()
	slices.Reverse(lane) // shrinking gives back the lowest groups first, as before
	sh := &shape{split: s, lane: lane, rem: rem, held: len(lane), claimed: len(lane), rest: true}
	extra := 0
	if rem {
		extra = s.Remainder()
	}
	all := len(lane)*s.GroupSMs() + extra
	sizes = withSize(sizes, all)
	for _, n := range sizes {
		if k := n - extra; k < 0 || k%max(s.GroupSMs(), 1) != 0 || k > len(lane)*s.GroupSMs() || n == 0 {
			s.give(lane, rem)
			return nil, fmt.Errorf("%w: a rest layout of %d SMs; this one can take %s", ErrGranularity, n, sh.sizes(s.GroupSMs(), extra))
		}
	}
	return s.buildLayouts(sh, sizes)
}

// withSize is sizes, sorted, without duplicates, with n added.
func withSize(sizes []int, n int) []int {
	out := append(slices.Clone(sizes), n)
	sort.Ints(out)
	return slices.Compact(out)
}

// checkSize refuses a layout size that is no whole number of groups.
func (s *Split) checkSize(n int) error {
	g := s.GroupSMs()
	if g == 0 || n <= 0 || n%g != 0 {
		return fmt.Errorf("%w: a layout of %d SMs; this split's layouts are multiples of %d", ErrGranularity, n, g)
	}
	return nil
}

// sizes lists the sizes a partition on this lane could take.
func (sh *shape) sizes(g, extra int) string {
	var b []string
	for k := 0; k <= len(sh.lane); k++ {
		if n := k*g + extra; n > 0 {
			b = append(b, fmt.Sprint(n))
		}
	}
	return strings.Join(b, ", ")
}

func (s *Split) buildLayouts(sh *shape, sizes []int) (*Partition, error) {
	extra := 0
	if sh.rem {
		extra = s.Remainder()
	}
	p := &Partition{drv: s.dev.drv, dev: s.dev, shape: sh, done: make(chan struct{}), rest: sh.rest}
	fail := func(err error) (*Partition, error) {
		for _, l := range p.layouts {
			err = errors.Join(err, l.destroy(s.dev))
		}
		s.give(sh.lane[:sh.held], sh.rem)
		return nil, err
	}
	for _, n := range sizes {
		k := (n - extra) / max(s.GroupSMs(), 1)
		l, err := newLayout(s.dev, s.resources(sh.lane[:k], sh.rem), sh.prio)
		if err != nil {
			return fail(fmt.Errorf("building the %d-SM layout: %w", n, err))
		}
		l.groups = k
		e, err := p.drv.EventCreate(s.dev.Primary(), cuda.EventDisableTiming)
		if err != nil {
			return fail(errors.Join(err, l.destroy(s.dev)))
		}
		l.events = []cuda.Event{e}
		p.layouts = append(p.layouts, l)
		if k == sh.held {
			p.cur.Store(l)
		}
	}
	p.sizes = make([]int, len(p.layouts))
	for i, l := range p.layouts {
		p.sizes[i] = l.sms
	}
	p.release = func() { s.give(sh.lane[:sh.claimed], sh.rem) }
	return p, nil
}

// Sizes lists the SM counts the partition can take (its layouts'), in
// ascending order; one for a partition that cannot be reshaped. A
// reshapable partition's list is made once and shared (fcsp's Stats reads
// it on every poll without garbage): callers must not modify it.
func (p *Partition) Sizes() []int {
	if p.sizes != nil {
		return p.sizes
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, len(p.layouts))
	for i, l := range p.layouts {
		out[i] = l.sms
	}
	return out
}

// Rest reports whether the partition took the rest of the split
// (WithRestOfSMs): the commons shares its SMs when none is free.
func (p *Partition) Rest() bool { return p.rest }

// Reshapable reports whether the partition was made with layouts.
func (p *Partition) Reshapable() bool { return p.shape != nil }

// Layout is the index of the current layout in Sizes; for the commons,
// how many times it has switched.
func (p *Partition) Layout() int {
	if p.commons {
		return int(p.epoch.Load())
	}
	l := p.cur.Load()
	for i, x := range p.layouts {
		if x == l {
			return i
		}
	}
	return 0
}

// Reshape makes the layout of sms SMs current. Work queued on the
// partition's streams before it runs to the end on the old layout's SMs;
// each of the new layout's streams waits for it (an event recorded on the
// old stream, cuStreamWaitEvent on the new), so work queued after runs in
// order on the new SMs. swap is told each stream's old and new handle.
// Growing takes the extra groups from the split and fails with
// ErrInsufficientSMs, changing nothing, if another partition holds them;
// shrinking gives groups back at once, while the work queued before may
// still be running on them. The old layout's streams stay valid (a handle
// taken before still queues work, on the old SMs) until the partition
// closes.
func (p *Partition) Reshape(sms int, swap func(old, new cuda.Stream)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	old := p.cur.Load()
	if p.shape == nil {
		if sms == old.sms {
			return nil
		}
		return fmt.Errorf("%w: this partition of %d SMs was made without layouts", ErrGranularity, old.sms)
	}
	next, err := p.layoutOf(sms)
	if err != nil {
		return err
	}
	if next == old {
		return nil
	}
	sh := p.shape
	had := sh.claimed
	if err := sh.claimTo(next.groups); err != nil {
		return err
	}
	if err := p.handOver(old, next, swap); err != nil {
		sh.giveTo(had) // what this call claimed; an earlier Claim's stays
		return err
	}
	sh.held = next.groups
	sh.giveTo(next.groups) // a shrink's groups, and a claim beyond the size taken
	return nil
}

// claimTo takes the lane's groups up to k from the split, where the
// partition has fewer; giveTo gives back those past k. Between them the
// lane's first claimed groups are the partition's. The caller holds p.mu.
func (sh *shape) claimTo(k int) error {
	if k <= sh.claimed {
		return nil
	}
	if err := sh.split.claim(sh.lane[sh.claimed:k], sh.rest); err != nil {
		return err
	}
	sh.claimed = k
	return nil
}

func (sh *shape) giveTo(k int) {
	if k < sh.claimed {
		sh.split.give(sh.lane[k:sh.claimed], false)
		sh.claimed = k
	}
}

// Claim takes from the split now the groups the layout of sms SMs adds to
// the current one, ahead of the Reshape that switches to it: whatever ran
// there (the commons, which follows the split) can leave them, and its
// work drain, while the partition's own work goes on where it is. A
// Reshape then uses them; Unclaim gives back those it has not. Claiming no
// more than the partition holds does nothing; a size it has no layout of
// is ErrGranularity, groups another partition holds ErrInsufficientSMs,
// as in Reshape.
func (p *Partition) Claim(sms int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.shape == nil {
		return nil // one layout: Reshape refuses any other size
	}
	next, err := p.layoutOf(sms)
	if err != nil {
		return err
	}
	return p.shape.claimTo(next.groups)
}

// layoutOf is the layout of sms SMs; ErrGranularity, naming the sizes
// there are, where there is none. The caller holds p.mu.
func (p *Partition) layoutOf(sms int) (*layout, error) {
	if i := slices.IndexFunc(p.layouts, func(l *layout) bool { return l.sms == sms }); i >= 0 {
		return p.layouts[i], nil
	}
	sizes := make([]string, len(p.layouts))
	for j, l := range p.layouts {
		sizes[j] = fmt.Sprint(l.sms)
	}
	return nil, fmt.Errorf("%w: reshape to %d SMs; this partition's layouts are %s SMs", ErrGranularity, sms, strings.Join(sizes, ", "))
}

// Unclaim gives back the groups Claim took that no Reshape has used.
func (p *Partition) Unclaim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sh := p.shape; sh != nil && !p.closed {
		sh.giveTo(sh.held)
	}
}

// handOver makes next the current layout in old's place: each of next's
// streams first waits for the work queued on old's (an event recorded on
// the old stream, cuStreamWaitEvent on the new), slot waiters on old move
// to next, and swap is told each stream's old and new handle. On an error
// nothing is switched (streams that already wait lose nothing: the wait
// is on work queued before). The caller holds p.mu.
func (p *Partition) handOver(old, next *layout, swap func(old, new cuda.Stream)) error {
	for j := range old.streams {
		if err := p.waitFor(old, next, j); err != nil {
			return err
		}
	}
	fresh := make(chan struct{})
	next.retired.Store(&fresh)
	p.prev = old
	p.setPend()
	p.cur.Store(next)
	close(*old.retired.Load()) // slot waiters on the old layout move to the new one
	if swap != nil {
		for j := range old.streams {
			swap(old.streams[j], next.streams[j])
		}
	}
	return nil
}

// setPend records whether prev or gave holds work to wait for. The caller
// holds p.mu.
func (p *Partition) setPend() { p.pend.Store(p.prev != nil || len(p.gave) > 0) }

// Drained reports whether the work queued on the layout the last Reshape
// left has run to its end (its hand-over events reached): until then that
// work may still run on SMs the partition no longer holds.
func (p *Partition) Drained() (bool, error) { return p.drained(false) }

// GaveDrained is Drained for the SMs the last Reshape gave up: true at
// once where it kept or grew them (its old layout's work runs on SMs it
// still holds, which no other partition can take). For the commons, the
// SMs its last Follow left, which a partition holds now.
//
// Where nothing is left to drain both answer true without the partition's
// lock. Else they take it, trying a few times: while another call holds it
// for long (a Close that waits for its streams holds it as long as their
// work takes) they answer false, and the caller asks again rather than
// waiting on that call.
func (p *Partition) GaveDrained() (bool, error) { return p.drained(true) }

// drainTries is how many times drained tries the partition's lock, letting
// the holder run between tries: a class that makes and closes a stream per
// request holds it often, briefly (on the simulator under -race, one try
// found it held at every tick of the controller for seconds).
const drainTries = 16

func (p *Partition) drained(gaveOnly bool) (bool, error) {
	if !p.pend.Load() {
		return true, nil
	}
	locked := p.mu.TryLock()
	for i := 1; !locked && i < drainTries; i++ {
		runtime.Gosched()
		locked = p.mu.TryLock()
	}
	if !locked {
		return false, nil // a Close or Reset waiting for the streams, or a Reshape: ask again
	}
	defer p.mu.Unlock()
	if p.commons && !p.closed { // the work its last Follow left (markGave)
		if done, err := p.reached(p.gave); !done || err != nil {
			return false, err
		}
		err := p.dropGave()
		p.setPend()
		return true, err
	}
	if p.prev == nil || p.closed || gaveOnly && p.prev.groups <= p.cur.Load().groups {
		return true, nil
	}
	if done, err := p.reached(p.prev.events); !done || err != nil {
		return false, err
	}
	p.prev = nil
	p.setPend()
	return true, nil
}

// reached reports whether every one of events has been reached. The
// caller holds p.mu.
func (p *Partition) reached(events []cuda.Event) (bool, error) {
	for _, e := range events {
		err := p.drv.EventQuery(p.dev.Primary(), e)
		if errors.Is(err, cuda.ErrorNotReady) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return true, nil
}

// waitFor queues on next's stream j a wait for the work queued on old's.
// A reshapable partition keeps an event per stream for it; the commons,
// which moves seldom, makes one for the hand-over (a wait holds the
// event's state when it is queued, so it may go at once).
func (p *Partition) waitFor(old, next *layout, j int) (err error) {
	primary := p.dev.Primary()
	var e cuda.Event
	if old.events != nil {
		e = old.events[j]
	} else if e, err = p.drv.EventCreate(primary, cuda.EventDisableTiming); err != nil {
		return err
	} else {
		defer func() { err = errors.Join(err, p.drv.EventDestroy(primary, e)) }()
	}
	if err = p.drv.EventRecord(primary, e, old.streams[j]); err == nil {
		err = p.drv.StreamWaitEvent(primary, next.streams[j], e)
	}
	return err
}

// claim marks groups idx used (and the rest's, if rest) if every one is
// free.
func (s *Split) claim(idx []int, rest bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range idx {
		if s.used[i] {
			return fmt.Errorf("%w: growing needs %d more groups of %d; another partition holds some of them (%d of %d grouped SMs free)",
				ErrInsufficientSMs, len(idx), s.GroupSMs(), s.freeGroups()*s.GroupSMs(), len(s.groups)*s.GroupSMs())
		}
	}
	for _, i := range idx {
		s.used[i], s.rest[i] = true, rest
		s.version.Add(1)
	}
	return nil
}
