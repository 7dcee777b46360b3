// Package place is where a tenant's work runs, chosen once when the tenant
// is made: a partition of the device's SMs (green contexts, Green), the
// SMs no partition holds, shared by the unpartitioned tenants (Commons),
// or the whole device shared through its primary context (Whole). The
// tenant asks its Placement rather than asking which one it is.
//
// A Placement is a small core that every placement has; what only some
// can do is an optional interface of its own (Slotted, Owned, Reshaper),
// as database/sql's driver.Conn is a core and driver.ConnBeginTx an
// option. The package's functions of the same names (Dos, Partitioned,
// Reshapable, ...) ask a placement for the option and answer as the whole
// device does where it lacks it, so that no placement answers for what it
// cannot do.
package place

import (
	"context"
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Placement is where a tenant's work runs: what every placement has.
type Placement interface {
	// SMs is how many SMs the work runs on (read back from the driver for
	// a partition; the device's, shared, for the whole device).
	SMs() int
	// Context is the tenant's CUcontext: the current layout's green
	// context, or the device's primary context.
	Context() cuda.Context
	// AnyThread is a context of the tenant's that any number of threads
	// may have current at once (the primary context), or 0 where there is
	// none (a green context is current on one thread at a time).
	AnyThread() cuda.Context

	// NewStream makes a stream for the tenant (first: the tenant's first
	// stream); own says the placement destroys it (DestroyStream, or its
	// close) rather than the stream's destroy.
	NewStream(first bool) (h cuda.Stream, own bool, err error)
	// DestroyStream destroys a stream NewStream made with own set.
	DestroyStream(h cuda.Stream, unused bool) error

	// Take takes the context a Do makes current.
	Take(ctx context.Context) (Taken, error)

	// Warm runs f, the tenant's warm-up id (fcsp.WithWarmup), on the
	// calling thread (locked by the caller) in every context a Do may
	// take now or after a Reshape, where it has not run: f makes the
	// context current, is told its SMs, and puts the thread's back.
	Warm(id uint64, f func(ctx cuda.Context, sms int) error) error
}

// Leaver is a shared placement that keeps something of the tenant's
// beyond it (Warming: its warm-up's record in the commons' contexts),
// which the tenant's Close gives back (Retire).
type Leaver interface {
	Placement
	Leave()
}

// Slotted is a placement of green contexts (a partition, or the commons),
// of which a Do holds one, a slot, while it is current. Without it a
// placement's context is the primary context, which excludes nothing.
type Slotted interface {
	Placement
	// DoGreen runs f with a context of the placement's SMs current, for
	// the driver calls whose result keeps them (graph capture,
	// instantiation).
	DoGreen(f func(ctx cuda.Context) error) error
	// Dos is how many Dos may hold a context at once (DoEach's runs).
	Dos() int
	// Waits reports the waits for a context.
	Waits() smpart.WaitStats
	// Layout numbers the placement's current layout, which a Reshape or a
	// move of the commons changes (a graph made in another is stale).
	Layout() int
	// Turn lets one DoEach at a time hold its contexts: each of its runs
	// holds one until all have run, so two at once could each hold part
	// and wait for the rest. The partition's: the commons' is shared by
	// its tenants.
	Turn() *inside.Turn
}

// Owned is a placement whose SMs are the tenant's own: a partition.
type Owned interface {
	Placement
	// IsContext reports whether ctx is the tenant's own context.
	IsContext(ctx cuda.Context) bool
	// Retire ends the tenant's hold on the placement at its Close: spare,
	// when not nil, is a partition made ready for another tenant (keep:
	// the pool's spares want its size), for the caller to keep or close.
	Retire(keep bool) (spare *smpart.Partition, err error)
	// Close gives the placement up (a tenant that failed to open).
	Close() error
}

// Reshaper is a placement that may have layouts of several sizes to
// switch between (WithReshapeSizes).
type Reshaper interface {
	Placement
	// Reshapable reports whether it has them.
	Reshapable() bool
	// Claim takes the SMs a growth to sms adds ahead of the Reshape that
	// switches to them; Unclaim gives back those no Reshape used.
	Claim(sms int) error
	Unclaim()
	// Reshape switches to the layout of sms SMs, swap moving each stream.
	Reshape(sms int, swap func(old, new cuda.Stream)) error
	// Sizes lists the layouts' SM counts.
	Sizes() []int
	// Drained reports whether the work queued before the last Reshape
	// has run; GaveDrained, the work on the SMs it gave up (true where it
	// gave none). An error (a lost device) leaves nothing to wait for.
	Drained() (bool, error)
	GaveDrained() (bool, error)
	// WarmOthers runs f in the n contexts of every layout but the
	// current one (DoEach's runs for the other sizes).
	WarmOthers(n int, f func(ctx cuda.Context, sms int) error) error
}

// Rewarmer is a shared placement that runs its tenant's warm-up again in
// the contexts it serves from now, after the pool moved it (Warming).
type Rewarmer interface {
	Placement
	Rewarm() error
}

// errNotReshapable is Reshape's answer for a placement with one layout
// (its caller checks Reshapable first).
var errNotReshapable = errors.New("place: the placement has one layout")

// DoGreen runs f as pl's DoGreen does; with the primary context where pl
// has no green contexts.
func DoGreen(pl Placement, f func(ctx cuda.Context) error) error {
	if s, ok := pl.(Slotted); ok {
		return s.DoGreen(f)
	}
	return f(pl.Context())
}

// Dos is pl's Dos; 1 where nothing excludes (DoEach runs once).
func Dos(pl Placement) int {
	if s, ok := pl.(Slotted); ok {
		return s.Dos()
	}
	return 1
}

// Waits is pl's Waits; none where nothing excludes.
func Waits(pl Placement) smpart.WaitStats {
	if s, ok := pl.(Slotted); ok {
		return s.Waits()
	}
	return smpart.WaitStats{}
}

// Layout is pl's Layout; 0 where it has one, for good.
func Layout(pl Placement) int {
	if s, ok := pl.(Slotted); ok {
		return s.Layout()
	}
	return 0
}

// Partitioned reports whether pl's SMs are the tenant's own.
func Partitioned(pl Placement) bool {
	_, ok := pl.(Owned)
	return ok
}

// IsContext reports whether ctx is the tenant's own context: never for a
// shared one (the primary context, the commons'), which is every
// unpartitioned tenant's.
func IsContext(pl Placement, ctx cuda.Context) bool {
	o, ok := pl.(Owned)
	return ok && o.IsContext(ctx)
}

// Retire is pl's Retire; nothing to give back where pl is shared.
func Retire(pl Placement, keep bool) (*smpart.Partition, error) {
	if o, ok := pl.(Owned); ok {
		return o.Retire(keep)
	}
	if l, ok := pl.(Leaver); ok {
		l.Leave()
	}
	return nil, nil
}

// Close is pl's Close; nothing where pl is shared (its pool closes it).
func Close(pl Placement) error {
	if o, ok := pl.(Owned); ok {
		return o.Close()
	}
	return nil
}

// Drained is pl's Drained; true where it has one layout, or answers an
// error (nothing is left to wait for).
func Drained(pl Placement) bool {
	r, ok := pl.(Reshaper)
	return !ok || answered(r.Drained())
}

// GaveDrained is pl's GaveDrained, as Drained answers.
func GaveDrained(pl Placement) bool {
	r, ok := pl.(Reshaper)
	return !ok || answered(r.GaveDrained())
}

// answered is true where the work is done or the partition answers an
// error (a lost device, closed).
func answered(done bool, err error) bool { return done || err != nil }

// WarmOthers is pl's WarmOthers; nothing where it has one layout.
func WarmOthers(pl Placement, n int, f func(ctx cuda.Context, sms int) error) error {
	if r, ok := pl.(Reshaper); ok && r.Reshapable() {
		return r.WarmOthers(n, f)
	}
	return nil
}

// Rewarm is pl's Rewarm; nothing where it keeps no warm-up.
func Rewarm(pl Placement) error {
	if r, ok := pl.(Rewarmer); ok {
		return r.Rewarm()
	}
	return nil
}

// Turn is pl's DoEach turn; nil where nothing excludes (DoEach runs once,
// on the primary context).
func Turn(pl Placement) *inside.Turn {
	if s, ok := pl.(Slotted); ok {
		return s.Turn()
	}
	return nil
}

// Rest reports whether pl is the partition that took the rest of the
// split (WithRestOfSMs), whose SMs the commons shares when none is free.
func Rest(pl Placement) bool {
	g, ok := pl.(Green)
	return ok && g.Part.Rest()
}

// Reshapable reports whether pl has layouts to switch between.
func Reshapable(pl Placement) bool {
	r, ok := pl.(Reshaper)
	return ok && r.Reshapable()
}

// Reshape is pl's Reshape; an error where it has one layout.
func Reshape(pl Placement, sms int, swap func(old, new cuda.Stream)) error {
	if r, ok := pl.(Reshaper); ok {
		return r.Reshape(sms, swap)
	}
	return errNotReshapable
}

// Claim is pl's Claim; nothing where it has one layout.
func Claim(pl Placement, sms int) error {
	if r, ok := pl.(Reshaper); ok {
		return r.Claim(sms)
	}
	return nil
}

// Unclaim is pl's Unclaim.
func Unclaim(pl Placement) {
	if r, ok := pl.(Reshaper); ok {
		r.Unclaim()
	}
}

// Sizes is pl's Sizes; its one size where it has one layout.
func Sizes(pl Placement) []int {
	if r, ok := pl.(Reshaper); ok {
		return r.Sizes()
	}
	return []int{pl.SMs()}
}

// Taken is what a Do took from its placement: returned by value, so that
// Do's frame stays on its stack.
type Taken struct {
	Slot   *smpart.Slot // the green context held; nil: none (the primary context)
	Cur    cuda.Context // the context to make current
	Thread int          // the calling thread, where named
	Named  bool         // the thread had to be found first (to nest or wait)
	Nested bool         // Slot was this thread's already (a Do inside a Do)
}

// Whole is the whole device, shared through the primary context, which
// may be current on any number of threads: nothing excludes. It has the
// core alone.
type Whole struct {
	Dev *smpart.Device
	N   int // the device's SMs
}

func (d Whole) SMs() int                { return d.N }
func (d Whole) Context() cuda.Context   { return d.Dev.Primary() }
func (d Whole) AnyThread() cuda.Context { return d.Dev.Primary() }

func (d Whole) NewStream(bool) (cuda.Stream, bool, error) {
	h, err := d.Dev.NewStream() // reused where one was released
	return h, false, err
}

func (d Whole) DestroyStream(h cuda.Stream, unused bool) error {
	if unused {
		return d.Dev.ReleaseUnused(h)
	}
	return d.Dev.ReleaseStream(h)
}

func (d Whole) Take(context.Context) (Taken, error) {
	return Taken{Cur: d.Dev.Primary()}, nil
}

// Warm runs f once in the primary context, the only one there is.
func (d Whole) Warm(_ uint64, f func(ctx cuda.Context, sms int) error) error {
	return f(d.Dev.Primary(), d.N)
}

// slots is what a partition and the commons share: green contexts, of
// which a Do holds one.
type slots struct {
	Part *smpart.Partition
}

func (g slots) SMs() int              { return g.Part.SMs() }
func (g slots) Context() cuda.Context { return g.Part.Context() }

func (g slots) DestroyStream(h cuda.Stream, unused bool) error {
	if unused {
		return g.Part.ReleaseUnused(h)
	}
	return g.Part.DestroyStream(h)
}

// Take takes a free slot before the thread is known (the caller's swap
// says it, in the same cgo call); when every slot is held, the thread is
// needed first, to nest on a slot this thread already holds (a Do inside a
// Do) or to wait.
func (g slots) Take(ctx context.Context) (t Taken, err error) {
	t.Slot, err = g.Part.TryAcquire()
	if t.Slot == nil && err == nil {
		t.Thread, t.Named = osthread.ID(), true
		if t.Slot = g.Part.Holding(t.Thread); t.Slot == nil {
			t.Slot, err = g.Part.Acquire(ctx)
		} else {
			t.Nested = true
		}
	}
	if err != nil {
		return Taken{}, err // greenctx.ErrClosed is errs.ErrClosed: one identity, not translated
	}
	t.Cur = t.Slot.Context()
	return t, nil
}

func (g slots) DoGreen(f func(ctx cuda.Context) error) error {
	return g.Part.Do(f) // smpart.ErrClosed is errs.ErrClosed
}

func (g slots) Waits() smpart.WaitStats { return g.Part.Waits() }
func (g slots) Layout() int             { return g.Part.Layout() }
func (g slots) Turn() *inside.Turn      { return g.Part.Turn() }

// Green is a partition of the device's SMs, the tenant's own: green
// contexts, of which a Do holds one (a slot) while it is current. It is
// Slotted, Owned and a Reshaper.
type Green struct{ slots }

// NewGreen places a tenant on partition p.
func NewGreen(p *smpart.Partition) Green { return Green{slots{p}} }

func (g Green) AnyThread() cuda.Context { return 0 }

func (g Green) NewStream(first bool) (cuda.Stream, bool, error) {
	if first {
		return g.Part.Stream(), true, nil
	}
	h, err := g.Part.NewStream()
	return h, true, err
}

func (g Green) Dos() int { return g.Part.Limit() }

func (g Green) IsContext(ctx cuda.Context) bool {
	return ctx != 0 && g.Part.Context() == ctx
}

// Warm runs f in every context of every layout: each slot the tenant may
// hold (WithConcurrentDos) of each size it may take, all made now, so that
// no Do and no Reshape meets a context made or unwarmed.
func (g Green) Warm(id uint64, f func(ctx cuda.Context, sms int) error) error {
	return g.Part.Warm(id, g.Part.Limit(), true, f)
}

// Retire keeps a prewarmed size for the pool's spares (the next tenant of
// that size skips green-context creation), else closes the partition.
func (g Green) Retire(keep bool) (*smpart.Partition, error) {
	if keep && g.Part.Reset() == nil {
		return g.Part, nil
	}
	return nil, g.Part.Close()
}

func (g Green) Close() error { return g.Part.Close() }

func (g Green) Reshapable() bool { return g.Part.Reshapable() }
func (g Green) Sizes() []int     { return g.Part.Sizes() }

func (g Green) Claim(sms int) error { return g.Part.Claim(sms) }
func (g Green) Unclaim()            { g.Part.Unclaim() }

func (g Green) Reshape(sms int, swap func(old, new cuda.Stream)) error {
	return g.Part.Reshape(sms, swap)
}

func (g Green) Drained() (bool, error)     { return g.Part.Drained() }
func (g Green) GaveDrained() (bool, error) { return g.Part.GaveDrained() }

func (g Green) WarmOthers(n int, f func(ctx cuda.Context, sms int) error) error {
	return g.Part.WarmOthers(n, f)
}

// Commons is where an unpartitioned tenant's work runs when the device can
// be partitioned: the pool's commons (internal/smpart, commons.go), shared
// by every such tenant, on the whole device while no partition exists and
// on the SMs no partition holds once one does. The pool moves it (Follow)
// as partitions are made, closed and reshaped, and closes it last. It is
// Slotted, neither Owned (its SMs and contexts are every unpartitioned
// tenant's, as the primary context is) nor a Reshaper.
type Commons struct{ slots }

// NewCommons places an unpartitioned tenant on the pool's commons p.
func NewCommons(p *smpart.Partition) Commons { return Commons{slots{p}} }

// AnyThread is the primary context while the commons is the whole device.
func (c Commons) AnyThread() cuda.Context {
	if c.Part.Whole() {
		return c.Part.Context()
	}
	return 0
}

// NewStream makes the tenant a stream of its own, its first included (the
// commons' first stream is no tenant's).
func (c Commons) NewStream(bool) (cuda.Stream, bool, error) {
	h, err := c.Part.NewStream()
	return h, true, err
}

// Dos is how many runs DoEach makes: the contexts one class uses at once
// by default, of the commons' many (its tenants share them).
func (c Commons) Dos() int { return min(c.Part.Limit(), smpart.DefaultSlots) }

// Warm runs f in the current layout's contexts, as many as DoEach's runs
// (Dos) made, and every other made and free: the commons moves with the
// partitions (each move warms the new layout again, fcsp's follow) and
// makes contexts on demand (Warming warms those).
func (c Commons) Warm(id uint64, f func(ctx cuda.Context, sms int) error) error {
	return c.Part.Warm(id, c.Dos(), false, f)
}
