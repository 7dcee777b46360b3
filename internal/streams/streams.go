// Package streams is the state behind fcsp's Stream handles: one of a
// tenant's CUDA streams with its class, admission gate, counters, free
// lists and capture, what its launches go through, and its lives.
//
// The state is reused by a later stream once its stream is closed, so
// that a server making a stream per request makes a handle's 16 bytes of
// garbage a request rather than the whole stream's. A handle therefore
// names one life of a Core (Gen): the calls made through it are counted
// while under way (Acquire, Release), and a life ends (Expire) only once
// they have left, so that a call racing the stream's Close, which CUDA
// itself forbids, can still not reach the stream that reuses the Core,
// another tenant's perhaps. Nothing of a stream is released for reuse
// before its life has ended (Close, Destroy, Retire keep that order).
//
// fcsp composes a Core with its tenant (which decides when, and in which
// of its locks, each call is made); a Core knows its tenant only through
// two narrow interfaces: at its Close (Tenant) and at a capture
// (Capturer).
package streams

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/devmem"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/graphs"
	"github.com/fcsp-go/fcsp-go/internal/hostwait"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/modules"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/spin"
	"github.com/fcsp-go/fcsp-go/stream"
)

// Core is a stream: what a handle names while it is open. Its zero value
// is a closed stream's, ready for Set.
type Core struct {
	hv       atomic.Uintptr // the CUstream; Tenant.Reshape swaps it (Swap)
	class    stream.Class   // set once before sharing
	gate     admission.Gate // chosen once, in Open
	owned    bool           // created by the SDK (destroyed on Close); set once before sharing
	fromPart bool           // the placement's own stream: the placement destroys it; set once before sharing
	launches atomic.Uint64
	last     atomic.Pointer[modules.Kernel] // the last kernel launched (a stall's report), beside launches: one line for both
	// gen counts the core's lives; a handle names one (Acquire). inflight
	// counts the calls made through a handle that are under way: a core
	// is reused only once none is (Retire), so that a call racing the
	// stream's Close, which CUDA itself forbids, can still not reach the
	// stream that reuses it, another tenant's perhaps. Beside launches,
	// which a launch writes too: one line for both.
	inflight atomic.Int32
	gen      atomic.Uint64
	waits    hostwait.History                 // how long its Synchronizes lasted: a long one sleeps
	blocks   devmem.Blocks                    // freed pool blocks for reuse on this stream
	capture  atomic.Pointer[graphs.Recording] // non-nil while a capture runs (BeginCapture)
	closed   atomic.Bool
	// used: the handle was taken (Handle), for the driver or for the
	// caller, so work may be queued on it and Close waits for it. A stream
	// made and closed unused is kept for reuse with no driver call.
	used atomic.Bool
	// watching: the stall watchdog looks at the stream now; a capture
	// begins only once it is done (a query or an event breaks a capture).
	watching atomic.Bool
	// Where its launches go: the pool's launcher, the tenant's placement
	// (which made a stream of its own, fromPart); set once before sharing.
	launcher *place.Launcher
	place    place.Placement
}

// Set makes c the state of a new stream h of class cl, whose launches go
// through l on pl: owned, made by the SDK (which destroys it on Close),
// and fromPart, pl's own (which pl destroys); an adopted stream is
// neither. The stream's gate is opened next (Open).
func (c *Core) Set(h cuda.Stream, cl stream.Class, owned, fromPart bool, l *place.Launcher, pl place.Placement) {
	c.hv.Store(uintptr(h))
	c.class, c.owned, c.fromPart = cl, owned, fromPart
	c.launcher, c.place = l, pl
}

// Open makes the stream's gate in its tenant's admission.
func (c *Core) Open(adm *admission.Tenant) error {
	return adm.Init(&c.gate, c.class, &c.hv, &c.closed)
}

// Gen is the core's present life, which a new handle names.
func (c *Core) Gen() uint64 { return c.gen.Load() }

// Acquire counts a call through a handle of life gen in (Release ends the
// count); false, counted out again, once that life has ended.
func (c *Core) Acquire(gen uint64) bool {
	c.inflight.Add(1)
	if c.gen.Load() != gen {
		c.inflight.Add(-1)
		return false
	}
	return true
}

// Keep counts a call in that holds the core without a handle (the memory
// engine's list of the tenant's streams, taken under the tenant's lock
// while the stream is listed): Release ends it, and Expire waits for it.
func (c *Core) Keep() { c.inflight.Add(1) }

// Release ends a call that Acquire or Keep counted.
func (c *Core) Release() { c.inflight.Add(-1) }

// Expire ends the core's life: handles of it are refused from now on, and
// once the calls made through them have left (own: the caller is one of
// them, acquired, and leaves here) nothing reaches the CUstream through
// it. It comes before anything the stream holds is released for reuse: a
// call racing the stream's Close, which CUDA itself forbids, may be past
// its checks, and must still land on this stream, not on the one that
// takes its CUstream next (another tenant's, perhaps).
func (c *Core) Expire(own bool) {
	c.gen.Add(1)
	if own {
		c.Release()
	}
	// Calls that acquired before the gen moved are leaving: most within
	// microseconds, a Synchronize racing the Close when the GPU is done.
	spin.Until(func() bool { return c.inflight.Load() <= 0 }, 50*time.Microsecond)
}

// Retire ends the core's life (Expire) once it is destroyed and clears
// it for reuse; false where it may not be reused: a metered gate may still
// be polled through a list, and the collector takes it. Nothing but
// handles may still name it: the tenant's lists have let it go.
func (c *Core) Retire(own bool) bool {
	c.Expire(own) // at once when Destroy or Close expired it
	if c.gate.Listed() {
		return false
	}
	c.class, c.owned, c.fromPart = 0, false, false
	c.gate = admission.Gate{}
	c.hv.Store(0)
	c.launches.Store(0)
	c.last.Store(nil)
	c.waits.Reset()
	c.blocks = devmem.Blocks{} // flushed by Close; another tenant's blocks must never be handed out here
	c.capture.Store(nil)
	c.closed.Store(false)
	c.used.Store(false)
	c.launcher, c.place = nil, nil
	return true
}

// Watch counts the stall watchdog's look at the stream of life gen in, as
// Acquire does, and marks it watched (a capture waits for the look to
// end: BeginCapture); false, with nothing counted, where that life ended,
// or the stream is captured (a query or an event would break the capture)
// or closing. Unwatch ends the look.
func (c *Core) Watch(gen uint64) bool {
	// Counted in first, so that a Close's Expire waits for the look, then
	// checked.
	c.inflight.Add(1)
	c.watching.Store(true)
	if c.gen.Load() != gen || c.capture.Load() != nil || c.closed.Load() {
		c.Unwatch()
		return false
	}
	return true
}

// Unwatch ends a look that Watch began.
func (c *Core) Unwatch() {
	c.watching.Store(false)
	c.Release()
}

// Handle is the stream's current CUstream, marked used: work may be
// queued on it from now on, and its Close waits for that.
func (c *Core) Handle() cuda.Stream {
	if !c.used.Load() {
		c.used.Store(true)
	}
	return cuda.Stream(c.hv.Load())
}

// Swap moves the placement's own stream from old to new (a Reshape's
// switch); a stream of any other is left as it is.
func (c *Core) Swap(old, new cuda.Stream) {
	if c.fromPart && cuda.Stream(c.hv.Load()) == old {
		c.hv.Store(uintptr(new))
	}
}

// Class is the stream's class.
func (c *Core) Class() stream.Class { return c.class }

// Gate is the stream's admission.
func (c *Core) Gate() *admission.Gate { return &c.gate }

// Launches counts the kernels launched on the stream through the SDK.
func (c *Core) Launches() uint64 { return c.launches.Load() }

// Last is the last kernel launched on the stream (nil: none yet).
func (c *Core) Last() *modules.Kernel { return c.last.Load() }

// Waits is how long the stream's waits lasted (internal/hostwait).
func (c *Core) Waits() *hostwait.History { return &c.waits }

// Blocks is the stream's free list (internal/devmem).
func (c *Core) Blocks() *devmem.Blocks { return &c.blocks }

// Closed reports whether the stream's Close began.
func (c *Core) Closed() bool { return c.closed.Load() }

// Capturing reports whether a capture of the stream runs.
func (c *Core) Capturing() bool { return c.capture.Load() != nil }

// BeginCapture marks the stream captured, recording into rec, once the
// stall watchdog's look at it (which a capture would break) is over;
// false where a capture runs already. EndCapture ends the mark.
func (c *Core) BeginCapture(rec *graphs.Recording) bool {
	if !c.capture.CompareAndSwap(nil, rec) {
		return false
	}
	for c.watching.Load() {
		runtime.Gosched()
	}
	return true
}

// EndCapture ends a capture that BeginCapture marked.
func (c *Core) EndCapture() { c.capture.Store(nil) }

// Totals is what a tenant's closed streams counted, kept so that its
// Stats's counters only go up (a server closes a stream a request).
type Totals struct {
	Launches uint64
	Gates    admission.GateSums
}

// AddTo adds the stream's counters to t as it leaves its tenant's list
// (the caller holds the tenant's lock): its calls are over.
func (c *Core) AddTo(t *Totals) {
	t.Launches += c.launches.Load()
	c.gate.AddTo(&t.Gates)
}

// Tenant is a stream's tenant as its Close sees it: the calls it counts in
// its life lock, and its primary context.
type Tenant interface {
	// Enter counts a call in; its error refuses it (errs.ErrClosed once
	// the tenant's Close began). Exit ends it.
	Enter() (uint32, error)
	Exit(slot uint32)
	Primary() cuda.Context
}

// Capturer is the tenant as a capture of its stream sees it.
type Capturer interface {
	graphs.Tenant
	// Layout numbers the tenant's layout now.
	Layout() int
	// Graphs is the tenant's set of graphs, made at its first capture; it
	// is asked for in the life lock, which orders it before the tenant's
	// Close.
	Graphs() *graphs.Set
}

// Capture makes g a relaxed capture of the stream, listed in t's set of
// graphs: the work f queues on the stream is recorded instead of run
// (graphs.Set.Capture), and the kernels launched through the SDK
// meanwhile are noted, not charged (Launch). A capture under way refuses
// a second. dos are the OS threads inside t's Dos, among which f's is
// named.
func (c *Core) Capture(t Capturer, dos *inside.Threads, g *graphs.Graph, f func() error) error {
	rec := &graphs.Recording{}
	if !c.BeginCapture(rec) {
		return fmt.Errorf("%w: the stream is capturing already", errs.ErrInvalidArgument)
	}
	defer c.EndCapture()
	// The whole capture counts in the life lock: the tenant's Close waits
	// for it to end (f's calls on the tenant fail with ErrClosed meanwhile)
	// instead of synchronising a capturing stream, which the driver refuses
	// (and which invalidates the capture). Hence begin and end go to the
	// context directly, not through a call of the tenant's, which a Close
	// under way refuses.
	slot, err := t.Enter()
	if err != nil {
		return err
	}
	defer t.Exit(slot)
	// f's calls on the tenant are made on behalf of a call in the life lock,
	// as a Do's are: pinned and named as one, they pass a Reshape's gate (the
	// Reshape waits for this capture) and a Close from f is ErrInsideDo.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	thread := osthread.ID()
	in := dos.Enter(thread)
	defer dos.Exit(in, thread)
	return t.Graphs().Capture(g, t.DoGreen, c.Handle(), rec, int32(t.Layout()), f)
}

// Close closes the stream for a caller that acquired it, and releases it:
// the stream's Close. First, counted in t's calls (so that the tenant's
// Close waits, and then finds the stream still listed), the stream refuses
// new calls and its gate wakes the launches waiting for tokens. Then its
// life ends (Expire) and the calls under way leave, outside t's calls: one
// may be waiting at a Reshape's gate, and the Reshape for this Close's
// call. Until they have, nothing of the stream is released. Last, counted
// in again, unlist takes it off the tenant's list (its counters kept, its
// free list flushed) and its CUstream is released; done says so, and the
// caller retires the core then. A tenant's Close that began meanwhile
// found it listed and destroys it (this Close may not touch it then); one
// that began before leaves it to that Close, as does a lost device (its
// error is returned); a Close racing this one is under way leaves it to
// that one.
func (c *Core) Close(t Tenant, unlist func() error) (done bool, err error) {
	slot, err := t.Enter()
	if err != nil {
		c.Release()
		if errors.Is(err, errs.ErrClosed) {
			return false, nil // the tenant's Close destroys it
		}
		return false, err // the device is lost: the stream stays, the tenant's Close destroys it
	}
	if !c.closed.CompareAndSwap(false, true) {
		t.Exit(slot)
		c.Release()
		return false, nil // a Close racing this one is under way
	}
	shut := c.gate.Close(t.Primary())
	t.Exit(slot)
	c.Expire(true)
	if slot, err = t.Enter(); err != nil {
		if errors.Is(err, errs.ErrClosed) {
			err = nil
		}
		return false, errors.Join(shut, err)
	}
	flushed := unlist()
	released := c.ReleaseHandle()
	if c.Own() {
		released = c.DestroyOwn()
	}
	t.Exit(slot)
	return true, errors.Join(shut, flushed, released) // no garbage when all are nil
}

// Destroy closes the stream's gate in cc (unless its Close did) and ends
// its life (Expire): the tenant's Close of a stream still listed, or a
// stream whose making failed. The caller keeps its counters and releases
// its CUstream next, then retires it.
func (c *Core) Destroy(cc cuda.Context) error {
	var shut error
	if !c.closed.Load() {
		shut = c.gate.Close(cc)
	}
	c.Expire(false)
	return shut
}

// ReleaseHandle gives a CUstream the SDK made in the primary context back
// to the device for reuse; its calls are over (Expire). The placement's
// own streams go through it (DestroyOwn); adopted ones are their owners'.
func (c *Core) ReleaseHandle() error {
	if !c.owned || c.fromPart {
		return nil
	}
	h := cuda.Stream(c.hv.Load())
	if c.used.Load() {
		return c.launcher.Dev.ReleaseStream(h)
	}
	return c.launcher.Dev.ReleaseUnused(h)
}

// Own reports whether the stream is the placement's own, made by the SDK:
// the placement destroys it (DestroyOwn).
func (c *Core) Own() bool { return c.owned && c.fromPart }

// DestroyOwn gives the placement's own stream back to it, its calls over
// (a partition's go with the partition: the commons' outlive a closing
// tenant, and its Close gives them back so).
func (c *Core) DestroyOwn() error {
	if !c.Own() {
		return nil
	}
	return c.place.DestroyStream(cuda.Stream(c.hv.Load()), !c.used.Load())
}
