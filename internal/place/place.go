// Package place is where a tenant's work runs, chosen once when the tenant
// is made: a partition of the device's SMs (green contexts, Green), or the
// whole device shared through its primary context (Whole). The tenant asks
// its Placement rather than asking which one it is.
package place

import (
	"context"
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Placement is where a tenant's work runs.
type Placement interface {
	// SMs is how many SMs the work runs on (read back from the driver for
	// a partition; the device's, shared, for the whole device).
	SMs() int
	// Partitioned reports whether the SMs are the tenant's own.
	Partitioned() bool
	// Context is the tenant's CUcontext: the current layout's green
	// context, or the device's primary context.
	Context() cuda.Context
	// AnyThread is a context of the tenant's that any number of threads
	// may have current at once (the primary context), or 0 where there is
	// none (a green context is current on one thread at a time).
	AnyThread() cuda.Context
	// IsContext reports whether ctx is the tenant's own context (not the
	// primary context, which is every unpartitioned tenant's).
	IsContext(ctx cuda.Context) bool

	// NewStream makes a stream for the tenant (first: the tenant's first
	// stream); own says the placement destroys it (DestroyStream, or its
	// close) rather than the stream's destroy.
	NewStream(first bool) (h cuda.Stream, own bool, err error)
	// DestroyStream destroys a stream NewStream made with own set.
	DestroyStream(h cuda.Stream, unused bool) error

	// Take takes the context a Do makes current.
	Take(ctx context.Context) (Taken, error)
	// Acquire takes a context for a caller that is in no Do (the OnClose
	// functions); a non-nil slot is released by the caller.
	Acquire(ctx context.Context) (*smpart.Slot, cuda.Context, error)
	// DoGreen runs f with a context of the tenant's SMs current, for the
	// driver calls whose result keeps them (graph capture, instantiation).
	DoGreen(f func(ctx cuda.Context) error) error
	// Dos is how many Dos may hold a context at once (DoEach's runs).
	Dos() int
	// Waits reports the waits for a context; zero where none excludes.
	Waits() smpart.WaitStats

	// Reshapable reports whether Reshape may switch the SMs; Layout
	// numbers the current layout (0 where there is one).
	Reshapable() bool
	Layout() int
	Reshape(sms int, swap func(old, new cuda.Stream)) error
	Sizes() []int

	// Retire ends the tenant's hold on the placement at its Close: spare,
	// when not nil, is a partition made ready for another tenant (keep: the
	// pool's spares want its size), for the caller to keep or close.
	Retire(keep bool) (spare *smpart.Partition, err error)
	// Close gives the placement up (a tenant that failed to open).
	Close() error
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
// may be current on any number of threads: nothing excludes.
type Whole struct {
	Dev *smpart.Device
	N   int // the device's SMs
}

func (d Whole) SMs() int                        { return d.N }
func (d Whole) Partitioned() bool               { return false }
func (d Whole) Context() cuda.Context           { return d.Dev.Primary() }
func (d Whole) AnyThread() cuda.Context         { return d.Dev.Primary() }
func (d Whole) IsContext(ctx cuda.Context) bool { return false }

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

func (d Whole) Acquire(context.Context) (*smpart.Slot, cuda.Context, error) {
	return nil, d.Dev.Primary(), nil
}

func (d Whole) DoGreen(f func(ctx cuda.Context) error) error { return f(d.Dev.Primary()) }
func (d Whole) Dos() int                                     { return 1 }
func (d Whole) Waits() smpart.WaitStats                      { return smpart.WaitStats{} }
func (d Whole) Reshapable() bool                             { return false }
func (d Whole) Layout() int                                  { return 0 }
func (d Whole) Sizes() []int                                 { return []int{d.N} }

func (d Whole) Reshape(int, func(old, new cuda.Stream)) error {
	return errors.New("the whole device is not reshaped") // Reshape checks Reshapable first
}

func (d Whole) Retire(bool) (*smpart.Partition, error) { return nil, nil }
func (d Whole) Close() error                           { return nil }

// Green is a partition of the device's SMs: green contexts, of which a Do
// holds one (a slot) while it is current.
type Green struct {
	Part *smpart.Partition
}

func (g Green) SMs() int                { return g.Part.SMs() }
func (g Green) Partitioned() bool       { return true }
func (g Green) Context() cuda.Context   { return g.Part.Context() }
func (g Green) AnyThread() cuda.Context { return 0 }

func (g Green) IsContext(ctx cuda.Context) bool {
	return ctx != 0 && g.Part.Context() == ctx
}

func (g Green) NewStream(first bool) (cuda.Stream, bool, error) {
	if first {
		return g.Part.Stream(), true, nil
	}
	h, err := g.Part.NewStream(0)
	return h, true, err
}

func (g Green) DestroyStream(h cuda.Stream, unused bool) error {
	if unused {
		return g.Part.ReleaseUnused(h)
	}
	return g.Part.DestroyStream(h)
}

// Take takes a free slot before the thread is known (the caller's swap
// says it, in the same cgo call); when every slot is held, the thread is
// needed first, to nest on a slot this thread already holds (a Do inside a
// Do) or to wait.
func (g Green) Take(ctx context.Context) (t Taken, err error) {
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
		if errors.Is(err, smpart.ErrClosed) {
			return Taken{}, errs.ErrClosed
		}
		return Taken{}, err
	}
	t.Cur = t.Slot.Context()
	return t, nil
}

func (g Green) Acquire(ctx context.Context) (*smpart.Slot, cuda.Context, error) {
	s, err := g.Part.Acquire(ctx)
	if err != nil {
		return nil, 0, err
	}
	return s, s.Context(), nil
}

func (g Green) DoGreen(f func(ctx cuda.Context) error) error {
	return g.Part.Do(f) // smpart.ErrClosed is errs.ErrClosed
}

func (g Green) Dos() int                { return g.Part.Limit() }
func (g Green) Waits() smpart.WaitStats { return g.Part.Waits() }
func (g Green) Reshapable() bool        { return g.Part.Reshapable() }
func (g Green) Layout() int             { return g.Part.Layout() }
func (g Green) Sizes() []int            { return g.Part.Sizes() }

func (g Green) Reshape(sms int, swap func(old, new cuda.Stream)) error {
	return g.Part.Reshape(sms, swap)
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

// Commons is where an unpartitioned tenant's work runs when the device can
// be partitioned: the pool's commons (internal/smpart, commons.go), shared by
// every such tenant, on the whole device while no partition exists and on
// the SMs no partition holds once one does. The pool moves it (Follow) as
// partitions are made, closed and reshaped; the tenant cannot reshape it.
type Commons struct {
	Green
}

// Partitioned is false: the SMs are shared with the other unpartitioned
// tenants (and, where no SM is free, with the partition of the rest).
func (c Commons) Partitioned() bool { return false }

// AnyThread is the primary context while the commons is the whole device.
func (c Commons) AnyThread() cuda.Context {
	if c.Part.Whole() {
		return c.Part.Context()
	}
	return 0
}

// IsContext is false: the commons' contexts are every unpartitioned
// tenant's, as the primary context is.
func (c Commons) IsContext(cuda.Context) bool { return false }

// NewStream makes the tenant a stream of its own, its first included (the
// commons' first stream is no tenant's).
func (c Commons) NewStream(bool) (cuda.Stream, bool, error) {
	h, err := c.Part.NewStream(0)
	return h, true, err
}

// Dos is how many runs DoEach makes: the contexts one class uses at once
// by default, of the commons' many (its tenants share them).
func (c Commons) Dos() int { return min(c.Part.Limit(), smpart.DefaultSlots) }

func (c Commons) Reshapable() bool { return false }
func (c Commons) Sizes() []int     { return []int{c.Part.SMs()} }

func (c Commons) Reshape(int, func(old, new cuda.Stream)) error {
	return errors.New("the commons is moved by its pool") // Reshape checks Reshapable first
}

// Retire and Close leave the commons to the pool, which closes it last.
func (c Commons) Retire(bool) (*smpart.Partition, error) { return nil, nil }
func (c Commons) Close() error                           { return nil }
