package smmove

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/inside"
	"github.com/fcsp-go/fcsp-go/internal/life"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/osthread"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/internal/spin"
)

// Member is a pool's tenant as a move sees it. The face implements it;
// the engine's tests, with a fake.
type Member interface {
	// Name names it in log lines.
	Name() string
	// Place is where its work runs.
	Place() place.Placement
	// Calls is its life lock: a move holds its new calls back (Hold),
	// waits until none is in flight (Quiet) and lets them go (Resume).
	Calls() *life.Lock
	// Dos names the OS threads inside its Dos.
	Dos() *inside.Threads
	// Swapper is the swap of its streams for a switch of layout: told a
	// stream's old and new handle, it moves the member's streams on old to
	// new. Taken while its calls are held (no stream is added meanwhile)
	// and called under the partition's lock, so it takes none.
	Swapper() func(old, new cuda.Stream)
	// Resized says its SMs changed (a launch-rate limit follows them).
	Resized(sms int) error
	// Rewarm runs its warm-up, if it has one, in the contexts its
	// placement serves from now, after a move of the commons; called with
	// nothing of the engine's held (it runs the server's code).
	Rewarm()
	// QueueBound bounds the GPU time it keeps queued ahead (0: none),
	// while a latency class may take its SMs (it is the rest).
	QueueBound(horizon time.Duration) error
}

// Role is what a member is to the controller.
type Role struct {
	Latency *Class        // a latency class (WithLatencyTarget)
	Rest    bool          // the rest tenant (WithRestOfSMs), which trades with it
	Horizon time.Duration // the rest's queue bound (0: DefaultHorizon; negative: none)
}

// Config is what a pool gives its engine.
type Config struct {
	Dev   *smpart.Device
	Split *smpart.Split // nil where the device cannot be partitioned: no commons
	Log   *slog.Logger
	// HandOff bounds a growth's wait for the work queued on the SMs it
	// takes (0: HandOffMax).
	HandOff time.Duration
}

// Hand-over timing: how often a growth looks whether the givers' queued
// work has run, and how long it waits at most. The bound is there because
// a giver may queue seconds of kernels, and a class growing for a burst
// must not sit on its floor that long: twice the longest hand-over
// measured in run A2 (H100, 2026-12-06).
const (
	handOffPoll = 50 * time.Microsecond
	HandOffMax  = 15 * time.Millisecond
)

// Engine moves a pool's SMs. Its methods are safe for concurrent use.
type Engine struct {
	// set once before sharing: by New, then only read (handOff, atOnce:
	// SetHandOff, SetGrowAtOnce, before sharing).
	dev     *smpart.Device
	split   *smpart.Split
	commons *smpart.Partition // nil without a split
	plain   place.Placement   // every unpartitioned tenant's: the commons, or the whole device
	log     *slog.Logger
	handOff time.Duration
	atOnce  bool // the latency class's growth in a trade switches without waiting for the hand-over (growth)

	// move is held by the move under way (the protocol: doc.go).
	move     lockorder.Sem[lockorder.PoolMove]
	waiters  waiters       // own lock; the OS threads waiting for move (rule 4)
	followed atomic.Uint64 // atomic; written under move: the split's Version the commons last followed
	rewarm   []Member      // guarded by move; the members whose warm-up runs once it is let go

	mu      lockorder.Mutex[lockorder.MoveMembers] // protects the following fields; no driver call under it
	members []Member                               // guarded by mu
	leaving []Member                               // guarded by mu; left (Leave), their Close still releasing their streams (Gone)
	lat     *Class                                 // guarded by mu; the latency class, until it leaves
	latM    Member                                 // guarded by mu; its member
	steer   *steerer                               // guarded by mu; the controller, while the latency class and its rest exist
	stopped []*steerer                             // guarded by mu; controllers stopped, for Close to wait for
	closed  bool                                   // guarded by mu
}

// New makes a pool's engine: with a split, its commons over the whole
// device (no partition holds an SM yet).
func New(cfg Config) (*Engine, error) {
	e := &Engine{dev: cfg.Dev, split: cfg.Split, log: cfg.Log, handOff: cfg.HandOff, atOnce: growth == GrowAtOnce}
	if e.handOff == 0 {
		e.handOff = HandOffMax
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.move.Init()
	e.plain = place.Whole{Dev: cfg.Dev, N: cfg.Dev.SMs()}
	if cfg.Split != nil {
		var err error
		if e.commons, err = cfg.Dev.NewCommons(); err != nil {
			return nil, err
		}
		e.plain = place.NewCommons(e.commons)
	}
	return e, nil
}

// SetHandOff changes the bound of a growth's wait (HandOffMax); call it
// before the engine is shared (a test that races the wait lengthens it).
func (e *Engine) SetHandOff(d time.Duration) { e.handOff = d }

// growth is how the latency class's growth in a trade takes the SMs the
// rest gave: GrowDrained (the default) or GrowAtOnce. It is chosen at link
// time, for an A/B on a GPU, and read once by New: scripts/gpu-test.sh
// builds storm-atonce with -ldflags "-X
// github.com/fcsp-go/fcsp-go/internal/smmove.growth=at-once".
var growth = GrowDrained

// The growths: GrowDrained waits, at most the engine's bound, for the work
// the rest (and the commons) queued on the SMs taken (AwaitHandOff), and
// the class's work meanwhile runs on the SMs it held; GrowAtOnce switches
// the class at once, and each SM taken passes to it as the blocks queued
// there before leave it: the class's streams are made at the device's
// greatest priority (tenancy), so that its blocks go before the rest's
// still waiting, if the block scheduler honours priority across green
// contexts (testdata/probes/growprio.cu asks the GPU). On an H100 (run
// C2, 2026-12-06, before the queue bound and with no priority) a growth
// at once onto two queued batch GEMMs took the 300 ms / 100 ms bursts'
// P99 from 496 to 599 µs.
const (
	GrowDrained = "drain"
	GrowAtOnce  = "at-once"
)

// SetGrowAtOnce makes the latency class's growth in a trade GrowAtOnce
// (true) or GrowDrained; call it before the engine is shared.
func (e *Engine) SetGrowAtOnce(on bool) { e.atOnce = on }

// Commons is the pool's commons (nil without a split), for probes and
// tests that ask which contexts are its.
func (e *Engine) Commons() *smpart.Partition { return e.commons }

// Steering reports whether a controller runs (a latency class and its
// rest exist).
func (e *Engine) Steering() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.steer != nil
}

// Plain is the placement of every unpartitioned tenant.
func (e *Engine) Plain() place.Placement { return e.plain }

// Join lists m, made by NewTenant: its SMs move with the pool's from now
// on (the commons' tenants', where it is unpartitioned). A latency class
// and the rest tenant that trades with it start the controller once both
// exist, and the rest's queue is bounded while it runs. The caller may
// hold the roster's lock (tenancy Roster.mu).
func (e *Engine) Join(m Member, r Role) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.members = append(e.members, m)
	switch {
	case r.Latency != nil:
		e.lat, e.latM = r.Latency, m
	case r.Rest && e.lat != nil && e.steer == nil && place.Reshapable(m.Place()):
		e.steer = e.startSteer(e.latM, m, e.lat, r.Horizon)
	}
}

// Leave unlists m as its Close begins: no move touches it after Leave
// returns (a move under way ends first, or gives way where the caller is
// inside a Do it waits for). Until Gone, the commons keeps the layouts its
// streams may be on: its Close still waits for and releases them. Where m is the latency class or its rest,
// the controller stops: its wait ends at once, and Leave waits for it to
// end unless called from inside a member's Do (where the controller's
// last step could wait for that Do); Close waits for it then.
func (e *Engine) Leave(m Member) {
	e.mu.Lock()
	st := e.steer
	if st != nil && (st.lat == m || st.rest == m) {
		st.stop() // a move under way ends now, and the lock below comes soon
		e.steer = nil
		e.stopped = append(e.stopped, st)
	} else {
		st = nil
	}
	e.mu.Unlock()
	if st != nil && st.lat == m {
		_ = st.rest.QueueBound(0) // no class takes the rest's SMs any more
	}
	locked := e.lock(context.Background()) == nil // a Background wait ends only with the lock
	e.mu.Lock()
	if i := slices.Index(e.members, m); i >= 0 {
		e.members = slices.Delete(e.members, i, i+1)
		e.leaving = append(e.leaving, m)
	}
	if e.latM == m {
		e.lat, e.latM = nil, nil
	}
	members := slices.Clone(e.members)
	e.mu.Unlock()
	if locked {
		e.unlock()
	}
	if st != nil && insideAny(members) == nil {
		<-st.done
	}
}

// Barrier waits for the move under way, if any (the pool's Close, before
// it lets anything go that a NewTenant's build may be using).
func (e *Engine) Barrier() {
	_ = e.lock(context.Background())
	e.unlock()
}

// Gone forgets m once its Close has released its streams.
func (e *Engine) Gone(m Member) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i := slices.Index(e.leaving, m); i >= 0 {
		e.leaving = slices.Delete(e.leaving, i, i+1)
	}
}

// Close stops the controller, waits for it and for the move under way,
// and lets the commons go. The pool's Close calls it once every tenant has
// closed; a move after it is ErrClosed.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.closed = true
	if st := e.steer; st != nil {
		st.stop()
		e.steer = nil
		e.stopped = append(e.stopped, st)
	}
	stopped := e.stopped
	e.stopped = nil
	e.mu.Unlock()
	for _, st := range stopped {
		<-st.done
	}
	e.Barrier()
	if e.commons == nil {
		return nil
	}
	return e.commons.Close()
}

// lock takes the move lock, waiting while ctx lives: from inside a Do
// that the move under way waits for, that move gives way (waiters).
func (e *Engine) lock(ctx context.Context) error {
	if e.move.TryLock() {
		return nil
	}
	runtime.LockOSThread() // the thread is named while it waits
	defer runtime.UnlockOSThread()
	t := osthread.ID()
	e.waiters.add(t)
	defer e.waiters.remove(t)
	if !e.move.Lock(ctx.Done()) {
		return ctx.Err()
	}
	return nil
}

// unlock lets the move lock go, then runs the warm-ups the move left to
// run (rule 6).
func (e *Engine) unlock() {
	rewarm := e.rewarm
	e.rewarm = nil
	e.move.Unlock()
	for _, m := range rewarm {
		m.Rewarm()
	}
}

// errAgain says a wait for calls gave the move lock up (rule 4): the move
// no longer holds it, and starts its step again once it has it back
// (run), reading again what it acts on.
var errAgain = errors.New("smmove: the move gave way; start again")

// errDone says a step is done and gave way after its last change: the
// lock is let go, and there is nothing to start again.
var errDone = errors.New("smmove: done, and gave way")

// run runs f, a move's step, under the move lock, waiting for the lock
// while ctx lives; where f gave way (errAgain: the lock is let go) it runs
// f again once the lock is back.
func (e *Engine) run(ctx context.Context, f func() error) error {
	for {
		if err := e.lock(ctx); err != nil {
			return err
		}
		if e.isClosed() {
			e.unlock()
			return errs.ErrClosed
		}
		switch err := f(); err {
		case errAgain:
		case errDone:
			return nil
		default:
			e.unlock()
			return err
		}
	}
}

// Change runs f, a change of who holds which SMs (NewTenant's), under the
// move lock; f may move the commons (Follow). Where a move inside f gave
// way (rule 4) f is run again once the lock is back: f must have undone
// what it did before it returns that error.
func (e *Engine) Change(ctx context.Context, f func() error) error { return e.run(ctx, f) }

// hold holds back the new calls (what: and waits) of ms, all at once, and
// waits until none is in flight in any of them at one time (rules 2, 3).
// It returns the members held (those closing are not: their calls are
// over), for release; ctx's error, holding nothing, if ctx ends first;
// errAgain where it gave way to a caller inside one of their Dos (rule 4):
// holding nothing, and the move lock let go. The caller holds the move
// lock.
func (e *Engine) hold(ctx context.Context, ms []Member, what life.Hold) ([]Member, error) {
	pass := passer(ms)
	held := make([]Member, 0, len(ms))
	for _, m := range ms {
		if m.Calls().Hold(what, pass) == nil {
			held = append(held, m)
		}
	}
	lockorder.Draining()
	for spins := 0; ; spins++ {
		if quiet(held, what) {
			return held, nil
		}
		if err := ctx.Err(); err != nil {
			release(held)
			return nil, err
		}
		if e.waiters.inside(held) {
			release(held)
			e.unlock() // a waiting sender is served as it is let go
			return nil, errAgain
		}
		spin.Step(spins, 50*time.Microsecond)
	}
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// quiet reports whether none of ms has an entry of kinds what in flight.
func quiet(ms []Member, what life.Hold) bool {
	for _, m := range ms {
		if !m.Calls().Quiet(what) {
			return false
		}
	}
	return true
}

// release lets ms's held calls go.
func release(ms []Member) {
	for _, m := range ms {
		m.Calls().Resume()
	}
}

// passer lets a call through the gates of ms where it comes from inside a
// Do of one of ms (rule 3).
type passer []Member

func (p passer) Pass() bool { return insideAny(p) != nil }

// insideAny is the member of ms inside one of whose Dos the calling thread
// runs, or nil.
func insideAny(ms []Member) Member {
	runtime.LockOSThread() // the look at the thread and the scan on one thread
	defer runtime.UnlockOSThread()
	t := osthread.ID()
	for _, m := range ms {
		if m.Dos().Has(t) {
			return m
		}
	}
	return nil
}

// errInside refuses a move that would wait for the Do it is called from
// (rule 7), naming that Do's tenant.
func errInside(m Member, what string) error {
	return fmt.Errorf("%w (%q's, %s); call it after that Do returns", errs.ErrInsideDo, m.Name(), what)
}

// waiters names the OS threads waiting for the move lock, so that a move
// waiting for the calls of a Do on one of them gives way (rule 4).
type waiters struct {
	mu      sync.Mutex // a leaf
	threads []int
}

func (w *waiters) add(t int) {
	w.mu.Lock()
	w.threads = append(w.threads, t)
	w.mu.Unlock()
}

func (w *waiters) remove(t int) {
	w.mu.Lock()
	if i := slices.Index(w.threads, t); i >= 0 {
		w.threads = slices.Delete(w.threads, i, i+1)
	}
	w.mu.Unlock()
}

// inside reports whether a waiter's thread is inside a Do of one of ms.
func (w *waiters) inside(ms []Member) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.threads {
		for _, m := range ms {
			if m.Dos().Has(t) {
				return true
			}
		}
	}
	return false
}

// partitioned lists the members with SMs of their own but skip.
func (e *Engine) partitioned(skip Member, into []Member) []Member {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.members {
		if m != skip && place.Partitioned(m.Place()) {
			into = append(into, m)
		}
	}
	return into
}

// plainMembers lists the unpartitioned members, and whether one that
// left is still closing (its streams in use).
func (e *Engine) plainMembers() (out []Member, closing bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.members {
		if !place.Partitioned(m.Place()) {
			out = append(out, m)
		}
	}
	for _, m := range e.leaving {
		closing = closing || !place.Partitioned(m.Place())
	}
	return out, closing
}

// errGranularity is smpart's, for the latency class's bounds.
var errGranularity = smpart.ErrGranularity
