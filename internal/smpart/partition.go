package smpart

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
)

// Partition is a green context over a set of SMs, with one non-blocking
// stream of its own. A partition made by Split.TakeLayouts holds several
// green contexts, one per size it may take (its layouts), of which one is
// current; Reshape switches between them (layout.go).
type Partition struct {
	drv cuda.Driver            // set once before sharing
	dev *Device                // set once before sharing
	cur atomic.Pointer[layout] // atomic; stored under mu once shared (handOver)

	// mu guards the lists of layouts, streams and events, and orders
	// Reshape and Close. It is held across the driver calls that make and
	// destroy them, never while a context is current (slots.go), and
	// across a call that waits for the device only in Reset and Close, on
	// the streams of a tenant that has closed (docs/LOCKS.md): Drained
	// only tries it.
	mu      lockorder.Mutex[lockorder.Partition]
	layouts []*layout // guarded by mu; by size, ascending; one for a plain partition (fixed once built but the commons': Layout reads it without mu)
	shape   *shape    // set once before sharing; nil for a plain partition (its fields: guarded by mu)
	sizes   []int     // set once before sharing; a reshapable partition's layouts' sizes: fixed once built, shared by Sizes
	closed  bool      // guarded by mu
	release func()    // set once before sharing; called by Close, under mu
	idle    []int     // guarded by mu; indices of streams closed by their owner, kept for reuse

	shut  atomic.Bool   // atomic; closed, read without mu on the slots' path
	done  chan struct{} // set once before sharing; closed by Close: slot waiters leave
	waits waitLog       // own lock
	turn  inside.Turn   // own lock; one DoEach at a time over its slots (Turn)
	rest  bool          // set once before sharing; took the rest of the split (TakeRest, TakeRestLayouts)
	prev  *layout       // guarded by mu; the layout the last switch left, until Drained
	// pend says prev or gave holds work to wait for (setPend), so that
	// Drained answers without mu where none is left.
	pend atomic.Bool // atomic; stored under mu

	// A pool's commons (commons.go): layouts built as the split changes,
	// named by key; epoch counts its switches (Layout); gave, events
	// recorded at the end of the work its streams held when its last
	// Follow left SMs, until they are reached (under mu).
	commons bool         // set once before sharing
	epoch   atomic.Int32 // atomic; added to under mu
	gave    []cuda.Event // guarded by mu
}

// layout is one green context of a partition, with a stream for each of
// the partition's streams (slot 0 its first) and, for a reshapable
// partition, an event per slot to hand the order over at a switch.
type layout struct {
	green   cuda.GreenCtx                 // set once before sharing
	ctx     cuda.Context                  // set once before sharing
	sms     int                           // set once before sharing
	groups  int                           // set once before sharing; how many of the lane's groups it holds (layout.go)
	streams []cuda.Stream                 // guarded by Partition.mu
	events  []cuda.Event                  // guarded by Partition.mu
	slots   slots                         // own lock; green contexts over the same SMs (slots.go)
	retired atomic.Pointer[chan struct{}] // atomic; closed when the layout stops being current

	gkey greenKey // set once before sharing; its SMs, as its green contexts are kept (greens.go)

	// The commons' (commons.go): which SMs (CommonsKey, and set's groups),
	// when it was last made current, and for the whole device's, its one
	// shared slot.
	key   string // set once before sharing
	set   SMSet  // set once before sharing
	stamp int32  // guarded by Partition.mu
	any   *Slot  // set once before sharing
}

func newLayout(d *Device, set SMSet, prio int) (*layout, error) {
	drv := d.drv
	desc, err := drv.DevResourceGenerateDesc(set.res)
	if err != nil {
		return nil, err
	}
	g, err := d.greenCtx(desc, set.key)
	if err != nil {
		return nil, err
	}
	l := &layout{green: g, gkey: set.key}
	fail := func(err error) (*layout, error) {
		return nil, errors.Join(err, drv.GreenCtxDestroy(g))
	}
	if l.ctx, err = drv.CtxFromGreenCtx(g); err != nil {
		return fail(err)
	}
	l.initSlots(desc)
	s, err := drv.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, prio)
	if err != nil {
		return fail(err)
	}
	l.streams = []cuda.Stream{s}
	got, err := drv.GreenCtxGetDevResource(g, cuda.ResourceSM)
	if err != nil {
		return fail(err)
	}
	l.sms = int(got.SMCount())
	return l, nil
}

// destroy waits for the layout's streams and destroys them and its events,
// then lets its green contexts go: kept for reuse if every call succeeded
// and no slot is held (greens.go), else destroyed. Streams and events are the driver's
// whatever context is current (docs/CONTEXTS.md), so the primary context,
// current on any thread, is used rather than one of the layout's.
func (l *layout) destroy(d *Device) error {
	drv, primary := d.drv, d.Primary()
	var errs []error
	for _, s := range l.streams {
		errs = append(errs, drv.StreamSynchronize(primary, s), drv.StreamDestroy(primary, s))
	}
	for _, e := range l.events {
		if e != 0 {
			errs = append(errs, drv.EventDestroy(primary, e))
		}
	}
	// Kept only if nothing failed and no slot is held: a holder racing the
	// close may still make its context current, which must not happen on
	// the thread of the context's next owner.
	clean := errors.Join(errs...) == nil && l.idle()
	errs = append(errs, l.letGoSlots(d, clean))
	if l.green == 0 { // the commons' whole device: the primary context
		return errors.Join(errs...)
	}
	return errors.Join(append(errs, d.letGo(l.green, l.gkey, clean))...)
}

// SMSet is a set of a split's SMs: the driver's resources, and the name
// its green contexts are kept under (greens.go).
type SMSet struct {
	res []cuda.DevResource
	key greenKey
	idx []int // the split's groups, ascending
	rem bool  // and its remainder
}

func newPartition(d *Device, set SMSet) (*Partition, error) {
	l, err := newLayout(d, set, 0)
	if err != nil {
		return nil, err
	}
	p := &Partition{drv: d.drv, dev: d, layouts: []*layout{l}, done: make(chan struct{})}
	p.cur.Store(l)
	return p, nil
}

// SMs is how many SMs the driver says the current green context holds
// (read back, not the number asked for).
func (p *Partition) SMs() int { return p.cur.Load().sms }

// Context is the CUcontext of the current green context (cuCtxFromGreenCtx).
func (p *Partition) Context() cuda.Context { return p.cur.Load().ctx }

// GreenCtx is the current CUgreenCtx handle.
func (p *Partition) GreenCtx() cuda.GreenCtx { return p.cur.Load().green }

// Stream is the partition's own non-blocking stream (in the current
// layout); 0 where it has none (the commons'). It takes the lock: the
// list it reads grows, shrinks and is handed over under it.
func (p *Partition) Stream() cuda.Stream {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.cur.Load().streams; len(s) > 0 {
		return s[0]
	}
	return 0
}

// NewStream creates another non-blocking stream on the partition (one in
// each of its layouts, and their events), at the partition's priority, and
// returns the current layout's; it is destroyed with the partition.
func (p *Partition) NewStream() (cuda.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		// A stream an earlier owner closed, idle since: no driver call.
		i := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return p.cur.Load().streams[i], nil
	}
	made := make([]cuda.Stream, len(p.layouts))
	var err error
	var evs []cuda.Event
	primary := p.dev.Primary()
	undo := func(err error) (cuda.Stream, error) {
		for _, s := range made {
			if s != 0 {
				err = errors.Join(err, p.drv.StreamDestroy(primary, s))
			}
		}
		for _, e := range evs {
			err = errors.Join(err, p.drv.EventDestroy(primary, e))
		}
		return 0, err
	}
	for i, l := range p.layouts {
		if made[i], err = p.layoutStream(l, p.priority()); err != nil {
			return undo(err)
		}
	}
	if p.shape != nil {
		for range p.layouts {
			e, err := p.drv.EventCreate(primary, cuda.EventDisableTiming)
			if err != nil {
				return undo(err)
			}
			evs = append(evs, e)
		}
	}
	for i, l := range p.layouts {
		l.streams = append(l.streams, made[i])
		if evs != nil {
			l.events = append(l.events, evs[i])
		}
	}
	return made[slices.Index(p.layouts, p.cur.Load())], nil
}

// priority is its streams' (TakeLayouts'), 0 for a plain partition's.
func (p *Partition) priority() int {
	if p.shape == nil {
		return 0
	}
	return p.shape.prio
}

// slot finds the stream h (of any layout) among the partition's streams.
// The caller holds p.mu.
func (p *Partition) slot(h cuda.Stream) int {
	for _, l := range p.layouts {
		if i := slices.Index(l.streams, h); i >= 0 {
			return i
		}
	}
	return -1
}

// maxIdleStreams is how many closed streams a partition keeps for reuse.
// A server that makes a stream per request and closes it after would
// otherwise create and destroy one in the driver per request, and on the
// H200 that storm raised a neighbouring request's P99 by half.
const maxIdleStreams = 8

// DestroyStream waits for a stream made by NewStream and destroys it (in
// every layout), or keeps it idle for the next NewStream. The partition's
// first stream lives as long as the partition.
func (p *Partition) DestroyStream(s cuda.Stream) error { return p.destroyStream(s, true) }

// ReleaseUnused is DestroyStream for a stream its owner never queued work
// on: nothing to wait for, so no driver call when it is kept.
func (p *Partition) ReleaseUnused(s cuda.Stream) error { return p.destroyStream(s, false) }

func (p *Partition) destroyStream(s cuda.Stream, wait bool) error {
	p.mu.Lock()
	gone := p.closed
	p.mu.Unlock()
	if gone {
		return ErrClosed
	}
	if wait {
		if err := p.drv.StreamSynchronize(p.dev.Primary(), s); err != nil {
			return err
		}
	}
	p.mu.Lock()
	if i := p.slot(s); slices.Contains(p.idle, i) {
		p.mu.Unlock()
		return fmt.Errorf("greenctx: stream %#x was destroyed already", uintptr(s))
	}
	first := 1 // the partition's own stream, index 0, lives with it
	if p.commons {
		first = 0 // the commons' streams are all its tenants'
	}
	if i := p.slot(s); i >= first && !p.closed && len(p.idle) < maxIdleStreams {
		p.idle = append(p.idle, i)
		p.mu.Unlock()
		return nil
	}
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	i := p.slot(s)
	if i < first {
		p.mu.Unlock()
		return fmt.Errorf("greenctx: stream %#x was not made by NewStream on %v", uintptr(s), p)
	}
	var streams []cuda.Stream
	var events []cuda.Event
	for k, j := range p.idle { // the indices after i move down one
		if j > i {
			p.idle[k] = j - 1
		}
	}
	for _, l := range p.layouts {
		streams = append(streams, l.streams[i])
		l.streams = slices.Delete(l.streams, i, i+1)
		if l.events != nil {
			events = append(events, l.events[i])
			l.events = slices.Delete(l.events, i, i+1)
		}
	}
	p.mu.Unlock()
	// Unlisted first, then waited for without the lock: a stream's
	// synchronisation may take as long as its work.
	primary := p.dev.Primary()
	var errs []error
	for _, h := range streams {
		errs = append(errs, p.drv.StreamSynchronize(primary, h), p.drv.StreamDestroy(primary, h))
	}
	for _, e := range events {
		errs = append(errs, p.drv.EventDestroy(primary, e))
	}
	return errors.Join(errs...)
}

// Abandon forgets stream h (of any layout), whose work may never end (a
// stalled tenant's): it is neither waited for nor destroyed, by the
// partition's Close or anything else, and stays the driver's until the
// process exits.
func (p *Partition) Abandon(h cuda.Stream) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.slot(h)
	if i < 0 || p.closed {
		return
	}
	p.idle = slices.DeleteFunc(p.idle, func(j int) bool { return j == i })
	for k, j := range p.idle {
		if j > i {
			p.idle[k] = j - 1
		}
	}
	for _, l := range p.layouts {
		l.streams = slices.Delete(l.streams, i, i+1)
		if l.events != nil {
			l.events = slices.Delete(l.events, i, i+1)
		}
	}
}

// Reset readies the partition for another owner: it waits for its streams
// and destroys all but the first, keeping the green context (whose creation
// is the expensive part), and forgets the warm-ups run in its contexts. A reshapable partition is not recycled: Reset
// refuses it.
func (p *Partition) Reset() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.shape != nil {
		return errors.New("greenctx: a reshapable partition is not recycled")
	}
	l, primary := p.layouts[0], p.dev.Primary()
	errs := []error{p.drv.StreamSynchronize(primary, l.streams[0])}
	for _, s := range l.streams[1:] {
		errs = append(errs, p.drv.StreamSynchronize(primary, s), p.drv.StreamDestroy(primary, s))
	}
	l.streams = l.streams[:1]
	p.idle = nil
	for _, s := range *l.slots.all.Load() {
		s.warmed.ids.Store(nil) // the next owner's warm-up has run in none of them
	}
	return errors.Join(errs...)
}

// Close waits for the partition's streams, destroys them and the green
// contexts, and returns its groups to the split. It is idempotent.
func (p *Partition) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.shut.Store(true)
	close(p.done)
	var errs []error
	for _, l := range p.layouts {
		errs = append(errs, l.destroy(p.dev)) // waits for the streams: gave's events are reached
	}
	errs = append(errs, p.dropGave())
	if p.release != nil {
		p.release()
	}
	return errors.Join(errs...)
}

// Turn lets one DoEach at a time hold the partition's contexts: each of
// its runs holds one until all have run, so two at once (two of the
// commons' tenants, say) could each hold part and wait for the rest.
func (p *Partition) Turn() *inside.Turn { return &p.turn }

func (p *Partition) String() string { return fmt.Sprintf("green context with %d SMs", p.SMs()) }
