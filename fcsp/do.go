package fcsp

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
)

// Do runs f on a locked OS thread with one of the tenant's contexts
// current on it, for code that uses the current context rather than taking
// one: cuBLAS, cuDNN, TensorRT, a cgo backend. For a partitioned tenant that
// is one of its green contexts, which the driver lets be current on one
// thread at a time and does not lock; so the tenant keeps several, all over
// its SMs, one for each Do in flight (WithConcurrentDos, 16 by default),
// and past that many a Do waits for one in arrival order. No other SDK call
// takes one: a server's allocations, streams, memory figures and scrapes
// never wait for a Do, nor a Do for them. An unpartitioned tenant's context
// is the device's primary context, current on any number of threads, so
// its Do excludes nothing.
//
// Afterwards the thread's previous current context is restored and the
// thread unlocked; so is it if f panics, and the panic goes on. f's error
// is returned as is.
//
// Inside f, the SDK's calls on the same tenant (Alloc, NewStream, Launch,
// a nested Do) run directly on f's thread. Library handles made in one Do
// (a cuBLAS handle) work in any other of the tenant's Dos, whichever of its
// green contexts that one holds (measured on the H200, docs/CONTEXTS.md).
// Do of another tenant from inside f makes that tenant's context current
// and restores this one after.
//
// A nil f is ErrInvalidArgument; a closed tenant ErrClosed; Close from
// inside f ErrInsideDo. If ctx ends while Do waits for a context, Do
// returns ctx's error at once and f does not run.
func (c *tenantCore) Do(ctx context.Context, f func(Current) error) error {
	return c.runDo(ctx, f, false)
}

// errTakenAfterDo: a Current used after its Do returned (Current.Stream).
var errTakenAfterDo = admission.ErrTakenAfterDo

// TryDo is Do without waiting for GPU-share tokens: under WithGPUShare, if
// the tenant's bucket does not hold f's predicted cost now, it returns
// ErrThrottled, charging nothing and not running f. It still waits, as Do,
// for a partitioned tenant's exclusion (ctx ends that wait). Without a GPU
// share it is Do.
func (t *Tenant) TryDo(ctx context.Context, f func(Current) error) error {
	defer runtime.KeepAlive(t)
	return t.c.runDo(ctx, f, true)
}

// runDo is Do, or with try TryDo.
func (c *tenantCore) runDo(ctx context.Context, f func(Current) error, try bool) error {
	if f == nil {
		return fmt.Errorf("%w: Do with a nil function", ErrInvalidArgument)
	}
	if ctx == nil {
		return fmt.Errorf("%w: Do with a nil context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Metered: admitted (under a GPU share) before anything is held, so a
	// Do waiting for tokens holds nothing, and a Reshape that holds new
	// calls back (its admission's included) waits for no Do of this one.
	var run *admission.Run
	ownRun := false
	if c.adm.Metered() { // a call the unmetered Do skips (BenchmarkDo on the H200)
		var err error
		if run, ownRun, err = c.adm.BeginDo(ctx, admission.FuncKey(f), try); err != nil {
			return err
		}
	}
	// Counted in the life lock: Close waits for f instead of destroying the
	// context under it.
	slot, err := c.enter()
	if err != nil {
		if ownRun {
			run.Abandon()
		}
		return err
	}
	defer c.life.exit(slot)
	return c.doOnThread(ctx, f, run, ownRun)
}

// doOnThread is Do from taking the thread on. Its undoing is one deferred
// call (doFrame.unwind) rather than one defer per step: with few defers
// and returns the compiler open-codes it, where five stack-allocated
// defers each cost a record and their unwinding a walk (BenchmarkDoCgo).
func (c *tenantCore) doOnThread(ctx context.Context, f func(Current) error, run *admission.Run, ownRun bool) (err error) {
	runtime.LockOSThread()
	fr := doFrame{c: c, slot: -2}
	defer fr.unwind(&err)
	// A partitioned tenant's Do holds one of its green contexts (a slot,
	// greenctx/slots.go) while that context is current (internal/place);
	// an unpartitioned tenant's takes the primary context, holding nothing.
	tk, err := c.place.Take(ctx) // by value: Do's frame stays on its stack
	if err != nil {
		if ownRun {
			run.Abandon()
		}
		return err
	}
	fr.gs, fr.nested = tk.Slot, tk.Nested
	cur, thread, named := tk.Cur, tk.Thread, tk.Named

	// One cgo call makes the context current, says what was, and which
	// thread this is.
	prev, tid, err := c.pool.dev.SwapCurrent(cur)
	if err != nil {
		return fmt.Errorf("tenant %q: Do: %w", c.name, err)
	}
	fr.prev, fr.restore = prev, prev != cur
	if !named {
		thread = tid
	}
	if fr.gs != nil && !fr.nested {
		fr.gs.Name(thread) // before f, the only code that could nest
	}
	fr.thread, fr.slot = thread, c.dos.enter(thread)
	if ownRun {
		fr.run = run
		if err := run.Start(thread, cur); err != nil {
			return fmt.Errorf("tenant %q: Do: timing its streams: %w", c.name, err)
		}
	}
	return f(Current{t: c, ctx: ctx, run: run, gctx: cur, slot: fr.slot, thread: thread})
}

// doFrame is what doOnThread has taken, for unwind to give back.
type doFrame struct {
	c       *tenantCore
	gs      *greenctx.Slot // the green context held; nil: unpartitioned
	nested  bool           // gs was this thread's already (a Do inside a Do)
	slot    int            // in c.dos (see doThreads.enter); -2: not entered
	thread  int
	restore bool // prev is to be made current again
	prev    cuda.Context
	run     *admission.Run // a metered run whose brackets are to close
}

// unwind gives back what the frame holds, in the reverse order of taking,
// also when f panics: the run's brackets close on this thread with the
// context still current and the exclusion held; the context stops being
// current before the exclusion is released, so before another thread may
// make it current; the thread is unlocked last.
func (fr *doFrame) unwind(err *error) {
	c := fr.c
	if e := fr.run.End(); e != nil {
		*err = errors.Join(*err, fmt.Errorf("tenant %q: Do: metering: %w", c.name, e))
	}
	if fr.restore {
		// Past the guard (raw): putting the thread's context back is no
		// device work, and a lost pool must not leave its green context
		// current. A lost device may refuse the previous context: none is
		// left current then rather than the green one, which another Do may
		// make current on its thread once this one gives its slot back.
		if e := greenctx.RestoreCurrent(c.pool.raw, fr.prev); e != nil {
			*err = errors.Join(*err, fmt.Errorf("tenant %q: Do: restoring the thread's context: %w", c.name, e))
		}
	}
	if fr.slot != -2 {
		c.dos.exit(fr.slot, fr.thread)
	}
	if fr.gs != nil && !fr.nested {
		fr.gs.Release()
	}
	runtime.UnlockOSThread()
}

// doThreads names the OS threads inside the tenant's Do, so that a Close
// made from one of them can be refused instead of waiting for itself.
//
// Do is the hot path and Close the rare one, so a Do claims a slot of its
// own (a compare-and-swap from 0 to its thread's id, starting at the slot
// the id hashes to) and Close reads them all. Slots are padded apart:
// concurrent Dos of an unpartitioned tenant write different lines. Only
// when every slot is taken does a Do count itself in the map under mu.
//
// A slot holding the calling thread's id can only have been written by
// that thread (the one goroutine locked to it, inside Do) and is cleared
// by it before its Do returns: so Close finds its own id exactly when it
// runs inside a Do on its own thread.
//
// The slots (4 KiB) are made by the tenant's first Do: a server makes and
// closes tenants that never call Do, and each would otherwise carry them.
type doThreads struct {
	slots atomic.Pointer[doSlotArray]
	over  atomic.Int32 // Dos counted in n
	mu    sync.Mutex
	n     map[int]int // thread -> Dos counted there when no slot was free
}

type doSlotArray [doSlots]struct {
	thread atomic.Int64
	_      [56]byte
}

const doSlots = 64

// enter counts a Do on thread in and returns its slot, or -1 for the map.
func (d *doThreads) enter(thread int) int {
	slots := d.slots.Load()
	if slots == nil {
		d.slots.CompareAndSwap(nil, new(doSlotArray))
		slots = d.slots.Load()
	}
	h := uint(thread) % doSlots
	for i := range uint(doSlots) {
		k := (h + i) % doSlots
		s := &slots[k].thread
		if s.Load() == 0 && s.CompareAndSwap(0, int64(thread)) {
			return int(k)
		}
	}
	d.mu.Lock()
	if d.n == nil {
		d.n = map[int]int{}
	}
	d.n[thread]++
	d.over.Add(1)
	d.mu.Unlock()
	return -1
}

// exit undoes enter.
func (d *doThreads) exit(slot, thread int) {
	if slot >= 0 {
		d.slots.Load()[slot].thread.Store(0)
		return
	}
	d.mu.Lock()
	if d.n[thread]--; d.n[thread] == 0 {
		delete(d.n, thread)
	}
	d.over.Add(-1)
	d.mu.Unlock()
}

// here reports whether the calling thread is inside a Do. A goroutine not
// locked to its thread can be here only if a Do on this thread is running,
// which then is its own (a locked thread runs no other goroutine).
func (d *doThreads) here() bool {
	thread := int64(osthread.ID())
	if testHookHere != nil {
		testHookHere() // between the look at the thread and the scan (do_test.go)
	}
	if slots := d.slots.Load(); slots != nil {
		for i := range slots {
			if slots[i].thread.Load() == thread {
				return true
			}
		}
	}
	if d.over.Load() == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[int(thread)] > 0
}

// testHookHere, set by a test only, runs inside here between reading the
// thread's id and scanning the slots.
var testHookHere func()

// checkNotInsideDo is called by what would wait for the tenant's Dos to
// end (Close, Shutdown, Reshape; the pool's Close and Shutdown) before it
// begins: from inside one it would wait for itself.
func (c *tenantCore) checkNotInsideDo(what string) error {
	// Pinned for the look: a goroutine that moved threads between reading
	// its thread's id and scanning could find a Do that started on the
	// thread it left, and refuse a Close made from outside every Do.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if c.dos.here() {
		return fmt.Errorf("%w: %s from inside tenant %q's Do would wait for that Do; call it after Do returns", ErrInsideDo, what, c.name)
	}
	return nil
}
