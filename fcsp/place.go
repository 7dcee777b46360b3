package fcsp

import (
	"context"
	"errors"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
)

// placement is where a tenant's work runs, chosen once in NewTenant: a
// partition of the device's SMs (green contexts, greenPlace), or the whole
// device shared through its primary context (devicePlace). The rest of the
// package asks it rather than asking which one it is.
type placement interface {
	// sms is how many SMs the work runs on (read back from the driver for
	// a partition; the device's, shared, for the whole device).
	sms() int
	// partitioned reports whether the SMs are the tenant's own.
	partitioned() bool
	// context is the tenant's CUcontext: the current layout's green
	// context, or the device's primary context.
	context() cuda.Context
	// anyThread is a context of the tenant's that any number of threads
	// may have current at once (the primary context), or 0 where there is
	// none (a green context is current on one thread at a time).
	anyThread() cuda.Context
	// isContext reports whether ctx is the tenant's own context (not the
	// primary context, which is every unpartitioned tenant's).
	isContext(ctx cuda.Context) bool

	// newStream makes a stream for the tenant (first: the tenant's first
	// stream); own says the placement destroys it (destroyStream, or its
	// close) rather than the stream's destroy.
	newStream(first bool) (h cuda.Stream, own bool, err error)
	// destroyStream destroys a stream newStream made with own set.
	destroyStream(h cuda.Stream, unused bool) error

	// take takes the context a Do makes current.
	take(ctx context.Context) (taken, error)
	// acquire takes a context for a caller that is in no Do (the OnClose
	// functions); a non-nil slot is released by the caller.
	acquire(ctx context.Context) (*greenctx.Slot, cuda.Context, error)
	// doGreen runs f with a context of the tenant's SMs current, for the
	// driver calls whose result keeps them (graph capture, instantiation).
	doGreen(f func(ctx cuda.Context) error) error
	// dos is how many Dos may hold a context at once (DoEach's runs).
	dos() int
	// waits reports the waits for a context; zero where none excludes.
	waits() WaitStats

	// reshapable reports whether reshape may switch the SMs; layout
	// numbers the current layout (0 where there is one).
	reshapable() bool
	layout() int
	reshape(sms int, swap func(old, new cuda.Stream)) error
	sizes() []int

	// retire ends the tenant's hold on the placement at its Close: spare,
	// when not nil, is a partition made ready for another tenant, for the
	// caller to keep or close.
	retire(p *Pool) (spare *greenctx.Partition, err error)
	// close gives the placement up (a NewTenant that failed).
	close() error
}

// taken is what a Do took from its placement: returned by value, so that
// Do's frame stays on its stack.
type taken struct {
	gs     *greenctx.Slot // the green context held; nil: none (the primary context)
	cur    cuda.Context   // the context to make current
	thread int            // the calling thread, where named
	named  bool           // the thread had to be found first (to nest or wait)
	nested bool           // gs was this thread's already (a Do inside a Do)
}

// devicePlace is the whole device, shared through the primary context,
// which may be current on any number of threads: nothing excludes.
type devicePlace struct {
	dev *greenctx.Device
	n   int // the device's SMs
}

func (d devicePlace) sms() int                        { return d.n }
func (d devicePlace) partitioned() bool               { return false }
func (d devicePlace) context() cuda.Context           { return d.dev.Primary() }
func (d devicePlace) anyThread() cuda.Context         { return d.dev.Primary() }
func (d devicePlace) isContext(ctx cuda.Context) bool { return false }

func (d devicePlace) newStream(bool) (cuda.Stream, bool, error) {
	h, err := d.dev.NewStream() // reused where one was released
	return h, false, err
}

func (d devicePlace) destroyStream(h cuda.Stream, unused bool) error {
	if unused {
		return d.dev.ReleaseUnused(h)
	}
	return d.dev.ReleaseStream(h)
}

func (d devicePlace) take(context.Context) (taken, error) {
	return taken{cur: d.dev.Primary()}, nil
}

func (d devicePlace) acquire(context.Context) (*greenctx.Slot, cuda.Context, error) {
	return nil, d.dev.Primary(), nil
}

func (d devicePlace) doGreen(f func(ctx cuda.Context) error) error { return f(d.dev.Primary()) }
func (d devicePlace) dos() int                                     { return 1 }
func (d devicePlace) waits() WaitStats                             { return WaitStats{} }
func (d devicePlace) reshapable() bool                             { return false }
func (d devicePlace) layout() int                                  { return 0 }
func (d devicePlace) sizes() []int                                 { return []int{d.n} }

func (d devicePlace) reshape(int, func(old, new cuda.Stream)) error {
	return errors.New("the whole device is not reshaped") // Reshape checks reshapable first
}

func (d devicePlace) retire(*Pool) (*greenctx.Partition, error) { return nil, nil }
func (d devicePlace) close() error                              { return nil }

// greenPlace is a partition of the device's SMs: green contexts, of which
// a Do holds one (a slot) while it is current.
type greenPlace struct {
	p *greenctx.Partition
}

func (g greenPlace) sms() int                { return g.p.SMs() }
func (g greenPlace) partitioned() bool       { return true }
func (g greenPlace) context() cuda.Context   { return g.p.Context() }
func (g greenPlace) anyThread() cuda.Context { return 0 }

func (g greenPlace) isContext(ctx cuda.Context) bool {
	return ctx != 0 && g.p.Context() == ctx
}

func (g greenPlace) newStream(first bool) (cuda.Stream, bool, error) {
	if first {
		return g.p.Stream(), true, nil
	}
	h, err := g.p.NewStream(0)
	return h, true, err
}

func (g greenPlace) destroyStream(h cuda.Stream, unused bool) error {
	if unused {
		return g.p.ReleaseUnused(h)
	}
	return g.p.DestroyStream(h)
}

// take takes a free slot before the thread is known (the caller's swap
// says it, in the same cgo call); when every slot is held, the thread is
// needed first, to nest on a slot this thread already holds (a Do inside a
// Do) or to wait.
func (g greenPlace) take(ctx context.Context) (t taken, err error) {
	t.gs, err = g.p.TryAcquire()
	if t.gs == nil && err == nil {
		t.thread, t.named = osthread.ID(), true
		if t.gs = g.p.Holding(t.thread); t.gs == nil {
			t.gs, err = g.p.Acquire(ctx)
		} else {
			t.nested = true
		}
	}
	if err != nil {
		if errors.Is(err, greenctx.ErrClosed) {
			return taken{}, ErrClosed
		}
		return taken{}, err
	}
	t.cur = t.gs.Context()
	return t, nil
}

func (g greenPlace) acquire(ctx context.Context) (*greenctx.Slot, cuda.Context, error) {
	s, err := g.p.Acquire(ctx)
	if err != nil {
		return nil, 0, err
	}
	return s, s.Context(), nil
}

func (g greenPlace) doGreen(f func(ctx cuda.Context) error) error {
	return g.p.Do(f) // greenctx.ErrClosed is ErrClosed
}

func (g greenPlace) dos() int { return g.p.Limit() }

func (g greenPlace) waits() WaitStats {
	w := g.p.Waits()
	return WaitStats{Calls: w.Calls, Waited: w.Waited, P50: w.P50, P99: w.P99, Max: w.Max}
}

func (g greenPlace) reshapable() bool { return g.p.Reshapable() }
func (g greenPlace) layout() int      { return g.p.Layout() }
func (g greenPlace) sizes() []int     { return g.p.Sizes() }

func (g greenPlace) reshape(sms int, swap func(old, new cuda.Stream)) error {
	return g.p.Reshape(sms, swap)
}

// retire keeps a prewarmed size for the pool's spares (the next tenant of
// that size skips green-context creation), else closes the partition.
func (g greenPlace) retire(p *Pool) (*greenctx.Partition, error) {
	p.mu.Lock()
	recycle := !p.closed && p.spare.Wants(g.p.SMs())
	p.mu.Unlock()
	if recycle && g.p.Reset() == nil {
		return g.p, nil
	}
	return nil, g.p.Close()
}

func (g greenPlace) close() error { return g.p.Close() }
