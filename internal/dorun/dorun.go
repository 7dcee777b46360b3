// Package dorun is how a tenant's Do runs the caller's function: on a
// locked OS thread with one of the tenant's contexts current, admitted
// (and metered) first where the tenant is metered, counted in the
// tenant's life lock and among the threads inside its Dos, the thread's
// own context put back after, also when the function panics. It runs
// Tenant.Do and TryDo (Do), DoEach's runs (Each), the tenant's OnClose
// functions (OnThread), and the warm-ups, which run as a Do's function
// in the contexts they are given (RunIn, WarmEvery, WarmOthers).
//
// It never imports the public face (package fcsp): what it needs of the
// tenant is a Tenant, which the face's tenant core implements, and the
// value the function is given (fcsp.Current) is the face's, made from an
// In. It holds no lock of its own: the life lock (internal/life), the
// threads inside (internal/inside) and a partition's slots
// (internal/smpart, through internal/place) are their packages'.
package dorun

import (
	"context"
	"errors"
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/admission"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Tenant is what a Do needs of its tenant: fcsp's tenant core implements
// it, a conversion of the core's pointer, as it implements the other
// engines' hosts. C is what the tenant's functions are given
// (fcsp.Current).
type Tenant[C any] interface {
	// Enter counts a call in the tenant's life lock, or fails (closed,
	// or its device lost: a bare error); Exit counts it out with Enter's
	// token.
	Enter() (token uint32, err error)
	Exit(token uint32)
	// Parts are what a Do takes of the tenant.
	Parts() Parts
	// Fail names err as the tenant's call op's (fcsp.TenantError).
	Fail(op string, err error) error
	// Current is what the tenant's function is given for its run at in.
	// (f is called here, not handed to the tenant: through an interface
	// call it would escape, and a Do's closure with it.)
	Current(in In) C
}

// Parts are what a Do takes of its tenant, handed over at once: one call
// on a Do's path rather than one for each.
type Parts struct {
	Placement place.Placement   // where the tenant's work runs: what a Do takes
	Threads   *inside.Threads   // the OS threads inside the tenant's Dos
	Admission *admission.Tenant // meters the tenant's Dos where it is metered
	// Device is the tenant's device, through the pool's guarded driver;
	// Raw is the driver past the guard, which puts a thread's context
	// back (no device work: a lost device must not leave a green context
	// current).
	Device *smpart.Device
	Raw    cuda.Driver
}

// In is where a run of the tenant's function is: what the value it is
// given (fcsp.Current) hands out.
type In struct {
	Ctx context.Context
	Run *admission.Run // the Do's metering; nil: the tenant is not metered
	Cur cuda.Context   // the context the run made current
	// The run's entry in the tenant's Threads, and its thread: while the
	// entry names the thread, the run is going on (Live, one atomic
	// load). A value kept after its Do must hand out nothing, since what
	// it names may be gone.
	Slot   int
	Thread int
	SMs    int // a warm-up's size (RunIn); 0: the tenant's
}

// Live reports whether the run at in is still going on: threads are the
// tenant's (Parts.Threads).
func (in In) Live(threads *inside.Threads) bool { return threads.Live(in.Slot, in.Thread) }

// Do runs f as Tenant.Do does (op "Do"), or with try as TryDo: under a
// GPU share, if the tenant's bucket does not hold f's predicted cost now,
// it fails with admission's ErrThrottled, charging nothing and not
// running f. Its own errors are named with op (Tenant.Fail), f's are
// returned as they are. The caller has checked its arguments.
func Do[C any](ctx context.Context, t Tenant[C], op string, f func(C) error, try bool) error {
	p := t.Parts()
	// Metered: admitted (under a GPU share) before anything is held, so a
	// Do waiting for tokens holds nothing, and a Reshape that holds new
	// calls back (its admission's included) waits for no Do of this one.
	var run *admission.Run
	ownRun := false
	if p.Admission.Metered() { // a call the unmetered Do skips (BenchmarkDo on the H200)
		var err error
		if run, ownRun, err = p.Admission.BeginDo(ctx, admission.FuncKey(f), try); err != nil {
			return t.Fail(op, err)
		}
	}
	// Counted in the life lock: Close waits for f instead of destroying the
	// context under it.
	slot, err := t.Enter()
	if err != nil {
		if ownRun {
			run.Abandon()
		}
		return t.Fail(op, err)
	}
	defer t.Exit(slot)
	return onThread(ctx, t, &p, op, f, run, ownRun)
}

// OnThread is Do from taking the thread on (a place.Frame: lock the
// thread, take a context, make it current, count the thread inside), for
// a caller counted in the tenant's life lock; run is the Do's metering
// (nil: none), ownRun whether it is this call's to start and end. Its
// undoing is one deferred call (unwind) rather than one defer per step:
// with few defers and returns the compiler open-codes it, where five
// stack-allocated defers each cost a record and their unwinding a walk
// (BenchmarkDoCgo). Its own errors are named with op (Tenant.Fail), f's
// are returned as they are; op "" leaves its own bare too, for a caller
// that names them (the tenant's close, running OnClose's functions).
func OnThread[C any](ctx context.Context, t Tenant[C], op string, f func(C) error, run *admission.Run, ownRun bool) error {
	p := t.Parts()
	return onThread(ctx, t, &p, op, f, run, ownRun)
}

// onThread is OnThread with the tenant's parts taken already.
func onThread[C any](ctx context.Context, t Tenant[C], p *Parts, op string, f func(C) error, run *admission.Run, ownRun bool) (err error) {
	var fr place.Frame
	var started *admission.Run // a metered run whose brackets are to close
	defer unwind(t, p.Raw, op, &fr, &started, &err)
	// A partitioned tenant's Do holds one of its green contexts (a slot,
	// internal/smpart/slots.go) while that context is current (internal/place);
	// an unpartitioned tenant's takes the primary context, holding nothing.
	if err := fr.Take(ctx, p.Placement); err != nil {
		if ownRun {
			run.Abandon()
		}
		return fail(t, op, err)
	}
	if err := fr.Swap(p.Device, p.Threads); err != nil {
		if ownRun {
			run.Abandon() // f never ran: its charge and its queue bound's go back
		}
		return fail(t, op, err)
	}
	if ownRun {
		started = run
		if err := run.Start(fr.Thread, fr.Cur); err != nil {
			return fail(t, op, fmt.Errorf("timing its streams: %w", err))
		}
	}
	return f(t.Current(In{Ctx: ctx, Run: run, Cur: fr.Cur, Slot: fr.Slot, Thread: fr.Thread}))
}

// unwind gives back what OnThread has taken, in the reverse order of
// taking, also when f panics: the run's brackets close on this thread with
// the context still current and the exclusion held; then the frame is left
// (place.Frame.Leave says in which order).
func unwind[C any](t Tenant[C], raw cuda.Driver, op string, fr *place.Frame, run **admission.Run, err *error) {
	if e := (*run).End(); e != nil {
		*err = errors.Join(*err, fail(t, op, fmt.Errorf("metering: %w", e)))
	}
	// Past the guard (raw): putting the thread's context back is no device
	// work, and a lost pool must not leave its green context current.
	if e := fr.Leave(raw); e != nil {
		*err = errors.Join(*err, fail(t, op, fmt.Errorf("restoring the thread's context: %w", e)))
	}
}

// fail is Tenant.Fail for OnThread's own errors: bare where op is "".
func fail[C any](t Tenant[C], op string, err error) error {
	if op == "" {
		return err
	}
	return t.Fail(op, err)
}
