package greenctx

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Partition is a green context over a set of SMs, with one non-blocking
// stream of its own. A partition made by Split.TakeLayouts holds several
// green contexts, one per size it may take (its layouts), of which one is
// current; Reshape switches between them (layout.go).
type Partition struct {
	drv cuda.Driver
	dev *Device
	cur atomic.Pointer[layout]

	// mu serialises calls that make this context current: the driver lets a
	// green context be current on one thread at a time and does no locking.
	// It also orders Reshape against those calls.
	mu      threadMutex
	layouts []*layout // by size, ascending; one for a plain partition
	shape   *shape    // nil for a plain partition
	closed  bool
	release func()
}

// layout is one green context of a partition, with a stream for each of
// the partition's streams (slot 0 its first) and, for a reshapable
// partition, an event per slot to hand the order over at a switch.
type layout struct {
	res     []cuda.DevResource // its groups, kept to rebuild it (reset.go)
	green   cuda.GreenCtx
	ctx     cuda.Context
	sms     int
	groups  int // how many of the lane's groups it holds (layout.go)
	streams []cuda.Stream
	events  []cuda.Event
}

func newLayout(d *Device, res []cuda.DevResource) (*layout, error) {
	drv := d.drv
	desc, err := drv.DevResourceGenerateDesc(res)
	if err != nil {
		return nil, err
	}
	g, err := drv.GreenCtxCreate(desc, d.dev, cuda.GreenCtxDefaultStream)
	if err != nil {
		return nil, err
	}
	l := &layout{res: res, green: g}
	fail := func(err error) (*layout, error) {
		return nil, errors.Join(err, drv.GreenCtxDestroy(g))
	}
	if l.ctx, err = drv.CtxFromGreenCtx(g); err != nil {
		return fail(err)
	}
	s, err := drv.GreenCtxStreamCreate(g, cuda.StreamNonBlocking, 0)
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

// destroy waits for the layout's streams and destroys them, its events and
// its green context.
func (l *layout) destroy(drv cuda.Driver) error {
	var errs []error
	for _, s := range l.streams {
		errs = append(errs, drv.StreamSynchronize(l.ctx, s), drv.StreamDestroy(l.ctx, s))
	}
	for _, e := range l.events {
		if e != 0 {
			errs = append(errs, drv.EventDestroy(l.ctx, e))
		}
	}
	return errors.Join(append(errs, drv.GreenCtxDestroy(l.green))...)
}

func newPartition(d *Device, res []cuda.DevResource) (*Partition, error) {
	l, err := newLayout(d, res)
	if err != nil {
		return nil, err
	}
	p := &Partition{drv: d.drv, dev: d, layouts: []*layout{l}}
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
// layout).
func (p *Partition) Stream() cuda.Stream { return p.cur.Load().streams[0] }

// NewStream creates another non-blocking stream on the partition (one in
// each of its layouts, and their events) and returns the current layout's;
// it is destroyed with the partition.
func (p *Partition) NewStream(priority int) (cuda.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	made := make([]cuda.Stream, len(p.layouts))
	var evs []cuda.Event
	undo := func(err error) (cuda.Stream, error) {
		for i, s := range made {
			if s != 0 {
				err = errors.Join(err, p.drv.StreamDestroy(p.layouts[i].ctx, s))
			}
		}
		for i, e := range evs {
			err = errors.Join(err, p.drv.EventDestroy(p.layouts[i].ctx, e))
		}
		return 0, err
	}
	for i, l := range p.layouts {
		s, err := p.drv.GreenCtxStreamCreate(l.green, cuda.StreamNonBlocking, priority)
		if err != nil {
			return undo(err)
		}
		made[i] = s
	}
	if p.shape != nil {
		for _, l := range p.layouts {
			e, err := p.drv.EventCreate(l.ctx, cuda.EventDisableTiming)
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

// DestroyStream waits for a stream made by NewStream and destroys it (in
// every layout). The partition's first stream lives as long as the
// partition.
func (p *Partition) DestroyStream(s cuda.Stream) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	i := p.slot(s)
	if i <= 0 {
		return fmt.Errorf("greenctx: stream %#x was not made by NewStream on %v", uintptr(s), p)
	}
	var errs []error
	for _, l := range p.layouts {
		errs = append(errs, p.drv.StreamSynchronize(l.ctx, l.streams[i]), p.drv.StreamDestroy(l.ctx, l.streams[i]))
		l.streams = slices.Delete(l.streams, i, i+1)
		if l.events != nil {
			errs = append(errs, p.drv.EventDestroy(l.ctx, l.events[i]))
			l.events = slices.Delete(l.events, i, i+1)
		}
	}
	return errors.Join(errs...)
}

// Do runs f with the partition's current context while no other caller of
// Do on this partition runs; f passes ctx to the driver calls that need it.
func (p *Partition) Do(f func(ctx cuda.Context) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	return f(p.cur.Load().ctx)
}

// Reset readies the partition for another owner: it waits for its streams
// and destroys all but the first, keeping the green context (whose creation
// is the expensive part). A reshapable partition is not recycled: Reset
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
	l := p.layouts[0]
	errs := []error{p.drv.StreamSynchronize(l.ctx, l.streams[0])}
	for _, s := range l.streams[1:] {
		errs = append(errs, p.drv.StreamSynchronize(l.ctx, s), p.drv.StreamDestroy(l.ctx, s))
	}
	l.streams = l.streams[:1]
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
	var errs []error
	for _, l := range p.layouts {
		errs = append(errs, l.destroy(p.drv))
	}
	if p.release != nil {
		p.release()
	}
	return errors.Join(errs...)
}

func (p *Partition) String() string { return fmt.Sprintf("green context with %d SMs", p.SMs()) }
