package place

import (
	"context"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Frame is a thread's stay in a placement's context, as Tenant.Do makes
// it: Take locks the calling goroutine to its thread and takes one of the
// placement's contexts (a green context's slot, or the primary context);
// Swap makes it current and counts the thread among those inside; Leave
// gives back what was taken, in the reverse order. A Frame lives on its
// caller's stack, so a Do allocates nothing: the caller declares a zero
// Frame, defers Leave (also when Take or Swap fails: it gives back what
// they took), then calls Take and Swap. Leave is called once per Frame.
type Frame struct {
	Cur    cuda.Context // the context Take took, current once Swap returns
	Thread int          // the calling OS thread, once Swap returns
	Slot   int          // the thread's entry in the Threads (inside.Threads.Enter)

	locked  bool         // Take locked the thread
	named   bool         // Thread was found by Take (to nest or wait)
	gs      *smpart.Slot // the green context held; nil: the primary context
	nested  bool         // gs was this thread's already (a Do inside a Do)
	threads *inside.Threads
	restore bool         // prev is to be made current again
	prev    cuda.Context // the thread's context before Swap
}

// Take locks the calling goroutine to its thread and takes the context pl
// gives a Do, waiting while ctx lives where every one is held; its error is
// ctx's, or errs.ErrClosed.
func (f *Frame) Take(ctx context.Context, pl Placement) error {
	runtime.LockOSThread()
	f.locked = true
	tk, err := pl.Take(ctx) // by value: the frame stays on its stack
	if err != nil {
		return err
	}
	f.gs, f.nested = tk.Slot, tk.Nested
	f.Cur, f.Thread, f.named = tk.Cur, tk.Thread, tk.Named
	return nil
}

// Swap makes the context Take took current, in one cgo call that also
// says what was current and which thread this is; names the thread as the
// green context's holder (so that a Do nested on it finds it); and counts
// the thread in threads.
func (f *Frame) Swap(dev *smpart.Device, threads *inside.Threads) error {
	prev, tid, err := dev.SwapCurrent(f.Cur)
	if err != nil {
		return err
	}
	f.prev, f.restore = prev, prev != f.Cur
	if !f.named {
		f.Thread = tid
	}
	if f.gs != nil && !f.nested {
		f.gs.Name(f.Thread) // before the caller's function, the only code that could nest
	}
	f.threads, f.Slot = threads, threads.Enter(f.Thread)
	return nil
}

// Leave gives back what Take and Swap took, in the reverse order, also
// when the caller's function panics: the context stops being current
// (drv makes the previous one current again) before its slot is released,
// so before another thread may make it current; the thread is unlocked
// last. Its error is the restoring's: a lost device may refuse the
// previous context, and none is left current then rather than the green
// one, which another Do may make current on its thread once this one gives
// its slot back.
func (f *Frame) Leave(drv cuda.Driver) error {
	var err error
	if f.restore {
		err = smpart.RestoreCurrent(drv, f.prev)
	}
	if f.threads != nil {
		f.threads.Exit(f.Slot, f.Thread)
	}
	if f.gs != nil && !f.nested {
		f.gs.Release()
	}
	if f.locked {
		runtime.UnlockOSThread()
	}
	return err
}
