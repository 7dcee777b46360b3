// Package tenancy is a pool's tenants as the pool keeps them, and the one
// order in which a tenant joins and leaves them.
//
// The roster (Roster) holds the live tenants by name, whether the pool is
// open, and the spare partitions a closed tenant's size goes back to
// (WithPrewarm), under the pool's lock. A tenant is made under the move
// lock (internal/smmove, Make): admitted under the roster's lock before
// any driver call (the pool open and not lost, the name free, a
// partition's ask resolved and its spares claimed), built outside it, so
// that no driver call is made under the lock (docs/LOCKS.md), then listed
// under it again, joining the moves and the stall watchdog, or undone
// where the pool closed, was lost, or a partition would leave the
// unpartitioned tenants no SMs meanwhile. A partition is handed out once
// the work queued on its SMs before it took them has run. A tenant leaves
// in the mirror order: out of the moves and the watchdog as its close
// begins (Leaving), off the list as it ends (Leave), its partition kept
// for the spares while the pool is open and wants its size.
//
// The tenant is the face's (fcsp's tenantCore): the roster keeps it as a
// T, whatever it is, and makes it through Tenant, the view of it that its
// making, the moves and the watchdog have. It never imports the face.
//
// # Locks
//
// Its place in docs/LOCKS.md's order:
//
//	Roster.mu (lockorder.PoolMu, 4: the tenants, the spares, closed; no driver call)
//	└── smmove Engine.mu (5), fcsp tenantCore.mu (6: only tried, in TryFind's is), smpart Split.mu (8), stall Watchdog.mu (a leaf)
package tenancy

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/config"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/fault"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smmove"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/internal/stall"
)

// Tenant is a tenant as its making and leaving see it: the face's. The
// moves (smmove.Member) and the stall watchdog (stall.Tenant) see it too,
// as it joins them here.
type Tenant interface {
	smmove.Member
	stall.Tenant
	// Build makes what the tenant is made of on part, the partition made
	// for it (nil: it is unpartitioned): its placement, account,
	// admission, first stream and memory engine, with quota its memory
	// quota. Like the partition's, its driver calls are made outside the
	// roster's lock.
	Build(cfg *config.Tenant, part *smpart.Partition, quota uint64) error
	// Unbuild undoes what of Build was made, in the order a close lets a
	// tenant's things go: the tenant was never listed, and no call was
	// made on it.
	Unbuild() error
	// CloseWhenDone closes the tenant when ctx is done (WithContext), once
	// it is listed: a ctx done already closes it at once.
	CloseWhenDone(ctx context.Context)
	// Close closes the tenant, listed: its partition could not be handed
	// over.
	Close() error
}

// Config is what a roster asks of the pool's other engines.
type Config struct {
	Moves      *smmove.Engine
	Split      *smpart.Split // nil where NoSplit says why
	NoSplit    error
	Fault      *fault.State
	Stalls     *stall.Watchdog
	Stall      time.Duration // the pool's stall timeout (WithStallTimeout); 0: none
	WorkQueues int           // the process's hardware work queues (smpart.CheckWorkQueues)
	// Resolve turns a partition's share of the SMs into a count; called
	// under the roster's lock.
	Resolve func(cfg *config.Tenant) error
	Log     *slog.Logger
}

// Roster is a pool's tenants: its methods are safe for concurrent use.
// Make it with New; Use gives it the pool's engines before a tenant is
// made.
type Roster[T comparable] struct {
	cfg   Config    // set once before sharing (Use)
	lists sync.Pool // own lock: Each's lists of the live tenants, kept for reuse

	mu      lockorder.Mutex[lockorder.PoolMu] // protects the following fields; no driver call under it
	spare   *smpart.Spares                    // guarded by mu: provisioned, not yet owned (WithPrewarm)
	tenants map[string]T                      // guarded by mu
	closed  bool                              // guarded by mu
}

// New makes a roster, with spare the pool's spare partitions (which the
// pool's split fills before the roster is shared).
func New[T comparable](spare *smpart.Spares) *Roster[T] {
	r := &Roster[T]{spare: spare, tenants: map[string]T{}}
	r.lists.New = func() any { l := make([]T, 0, 16); return &l }
	return r
}

// Use gives the roster the pool's engines; before it is shared.
func (r *Roster[T]) Use(cfg Config) { r.cfg = cfg }

// Make makes c, which t is a view of, one of the pool's tenants, as the
// package doc says; class is a latency class's (nil for others), quota the
// tenant's memory quota. Its errors are bare: the face names the tenant.
func (r *Roster[T]) Make(c T, t Tenant, cfg *config.Tenant, quota uint64, class *smmove.Class) error {
	moves, bg := r.cfg.Moves, context.Background()
	// Under the move lock (internal/smmove): the shape asked is resolved,
	// the partition built and listed before another change; an
	// unpartitioned tenant's commons follows the partitions first (it
	// does not move while it serves no tenant). A change that gave way to
	// a caller inside a Do it waited for runs again: nothing is built yet.
	// The pool's Close waits for the move lock (smmove.Engine.Barrier)
	// before it lets anything of the pool go that a build may use.
	err := moves.Change(bg, func() error {
		if cfg.Rest {
			if err := moves.ForRest(bg); err != nil { // a latency class back on its floor
				return err
			}
		}
		claimed, err := r.admit(t.Name(), cfg)
		if err != nil {
			return err
		}
		if !cfg.Partitioned() {
			if err := moves.Follow(true); err != nil {
				return err
			}
		}
		var part *smpart.Partition
		if cfg.Partitioned() { // built from what admit claimed of the spares, outside the lock
			if part, err = r.cfg.Split.TakeFor(claimed, askOf(cfg)); err != nil {
				return err
			}
			part.SetSlots(cmp.Or(cfg.Dos, smpart.DefaultSlots))
		}
		if err := t.Build(cfg, part, quota); err != nil {
			return errors.Join(err, t.Unbuild())
		}
		if err := r.list(c, t, cfg, class); err != nil {
			return errors.Join(err, t.Unbuild())
		}
		if cfg.Ctx != nil {
			t.CloseWhenDone(cfg.Ctx) // last: a ctx already done closes the tenant at once
		}
		if r.cfg.Log.Enabled(bg, slog.LevelInfo) { // its arguments are garbage otherwise
			r.cfg.Log.Info("tenant created", createdArgs(t, quota, cfg)...)
		}
		return nil
	})
	if err != nil || !cfg.Partitioned() {
		return err
	}
	// A partition: the unpartitioned tenants leave its SMs, and the work
	// queued there before runs (smmove.AwaitHandOff), before it is handed
	// out or warmed.
	if err := moves.FollowNow(bg); err != nil {
		return errors.Join(err, t.Close())
	}
	_ = moves.AwaitHandOff(bg, t) // bounded; with no ctx to end it, no error
	return nil
}

// open is nil while the pool is open and its device not lost. The caller
// holds mu.
func (r *Roster[T]) open() error {
	if r.closed {
		return errs.ErrClosed
	}
	return r.cfg.Fault.Err()
}

// admit is what Make checks before any driver call, under the roster's
// lock: the pool is open and not lost, the name is free, and a
// partition's ask (its shape, a latency class's sizes) is resolved;
// claimed is what of the pool's spares its partition will use
// (Spares.Claim). The caller holds the move lock, which every Make takes,
// so that the name is still free when the tenant is listed.
func (r *Roster[T]) admit(name string, cfg *config.Tenant) (claimed smpart.Claimed, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.open(); err != nil {
		return smpart.Claimed{}, err
	}
	if _, ok := r.tenants[name]; ok {
		return smpart.Claimed{}, errs.ErrNameTaken
	}
	if !cfg.Partitioned() {
		return smpart.Claimed{}, nil
	}
	if err := smpart.CheckWorkQueues(r.cfg.WorkQueues); err != nil { // a partition on one shared queue would isolate by luck
		return smpart.Claimed{}, err
	}
	switch {
	case cfg.Latency.Min > 0:
		if cfg.Shape.Sizes, err = r.cfg.Moves.LatencySizes(name, cfg.Latency.Min, cfg.Latency.Max); err != nil {
			return smpart.Claimed{}, err
		}
		cfg.SMs = cfg.Latency.Min
	case cfg.Rest && len(cfg.Shape.Sizes) == 0 && r.cfg.Split != nil:
		cfg.Shape.Sizes = r.cfg.Moves.RestSizes(r.freeSMs())
		// It trades with a latency class: metered, so that its queue can
		// be bounded (WithQueueHorizon).
		cfg.Metered = cfg.Metered || cfg.Shape.Sizes != nil && cfg.Horizon != config.NoQueueHorizon
	}
	if r.cfg.NoSplit != nil {
		return smpart.Claimed{}, r.cfg.NoSplit
	}
	if err := r.cfg.Resolve(cfg); err != nil {
		return smpart.Claimed{}, err
	}
	return r.spare.Claim(askOf(cfg)), nil
}

// askOf is what a partitioned tenant asks of the split, once admit has
// resolved its shape.
func askOf(cfg *config.Tenant) smpart.Ask {
	a := smpart.Ask{SMs: cfg.SMs, Rest: cfg.Rest, Remainder: cfg.Shape.Remainder, Sizes: cfg.Shape.Sizes}
	if cfg.Latency.Min > 0 {
		// A latency class's blocks go first wherever they and another's
		// wait for the same SMs: a growth at once (smmove.GrowAtOnce)
		// takes SMs whose queued work still runs.
		a.Priority = cuda.StreamPriorityGreatest
	}
	return a
}

// list makes the tenant built one of the pool's, under the roster's lock:
// unless the pool closed or was lost since admit, or, for a partition,
// the unpartitioned tenants would be left no SMs. Listed, it joins the
// moves and, where a stall timeout applies (its own, or the pool's), the
// stall watchdog.
func (r *Roster[T]) list(c T, t Tenant, cfg *config.Tenant, class *smmove.Class) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.open(); err != nil {
		return err
	}
	moves := r.cfg.Moves
	if n := moves.PlainCount(); place.Partitioned(t.Place()) && n > 0 && !moves.CommonsLeft() {
		return smmove.ErrNoCommons(n)
	}
	r.tenants[t.Name()] = c
	moves.Join(t, smmove.Role{Latency: class, Rest: cfg.Rest, Horizon: cfg.Horizon})
	if bound := cmp.Or(cfg.Stall, r.cfg.Stall); bound > 0 {
		r.cfg.Stalls.Watch(t, bound)
	}
	return nil
}

// createdArgs is what the "tenant created" line says: the limit the
// tenant has (a GPU share, a floor or a launch-rate limit), not an
// sm_limit of 0 for a share.
func createdArgs(t Tenant, quota uint64, cfg *config.Tenant) []any {
	pl := t.Place()
	args := []any{"tenant", t.Name(), "sms", pl.SMs(), "partitioned", place.Partitioned(pl), "quota", quota}
	switch {
	case cfg.GPUShare > 0:
		args = append(args, "gpu_share", cfg.GPUShare)
	case cfg.SMLimit > 0:
		args = append(args, "sm_limit", cfg.SMLimit)
	}
	if cfg.Prio.Floor > 0 {
		args = append(args, "bandwidth_floor", cfg.Prio.Floor)
	}
	if cfg.Prio.Prio == config.LatencyCritical {
		args = append(args, "priority", "latency-critical")
	}
	if cfg.Shape.Share > 0 {
		args = append(args, "sm_share", cfg.Shape.Share)
	}
	return args
}

// Leaving takes t out of the engines it joined when it was listed, as its
// close begins: no move of its SMs from here on, nor a look at its
// streams.
func (r *Roster[T]) Leaving(t Tenant) {
	r.cfg.Moves.Leave(t)
	r.cfg.Stalls.Unwatch(t)
}

// Leave takes c, which t is a view of, off the roster, last of its close:
// its placement is retired (a partition kept for the spares while the
// pool is open and wants its size: the next tenant of that size skips
// green-context creation; else closed), and the commons forgets its
// streams, which are released. The tenant leaves the list last, so that a
// pool's Close that starts meanwhile finds it and waits for its close to
// end.
func (r *Roster[T]) Leave(c T, t Tenant) error {
	pl := t.Place()
	keep := false
	if place.Partitioned(pl) {
		r.mu.Lock()
		keep = !r.closed && r.spare.Wants(pl.SMs())
		r.mu.Unlock()
	}
	spare, err := place.Retire(pl, keep)
	r.mu.Lock()
	r.forget(t.Name(), c)
	if spare != nil && !r.closed {
		r.spare.Add(spare)
		spare = nil
	}
	r.mu.Unlock()
	if spare != nil { // the pool closed meanwhile
		err = errors.Join(err, spare.Close())
	}
	r.cfg.Moves.Gone(t) // its streams are released: the commons may let their layouts go
	return err
}

// Forget takes c off the roster where it is listed under name, and
// nothing else: a stalled tenant's close leaves what its work may use
// where it is.
func (r *Roster[T]) Forget(name string, c T) {
	r.mu.Lock()
	r.forget(name, c)
	r.mu.Unlock()
}

// forget is Forget; the caller holds mu.
func (r *Roster[T]) forget(name string, c T) {
	if r.tenants[name] == c {
		delete(r.tenants, name)
	}
}

// Get is the live tenant of that name.
func (r *Roster[T]) Get(name string) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.tenants[name]
	return c, ok
}

// Names lists the live tenants' names, sorted.
func (r *Roster[T]) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.tenants))
	for n := range r.tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// List appends the live tenants to into.
func (r *Roster[T]) List(into []T) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.appendTo(into)
}

// Read is List, with whether the pool is closed and how many SMs can
// still be given to partitioned tenants (the spares' included), read at
// the same moment.
func (r *Roster[T]) Read(into []T) (live []T, closed bool, freeSMs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.appendTo(into), r.closed, r.freeSMs()
}

// Each calls f with each live tenant, outside the roster's lock (f may
// make driver calls), and says what Read says. The list it takes under the
// lock is kept for reuse, so that a loop that polls the pool makes no
// garbage: a list on the stack held 16, and a pool of more (a class per
// model, a storm's short-lived tenants) grew a new array at every call.
func (r *Roster[T]) Each(f func(T)) (closed bool, freeSMs int) {
	l := r.lists.Get().(*[]T)
	live, closed, freeSMs := r.Read((*l)[:0])
	for _, c := range live {
		f(c)
	}
	clear(live) // a kept list must not keep closed tenants reachable
	*l = live[:0]
	r.lists.Put(l)
	return closed, freeSMs
}

// appendTo is List; the caller holds mu.
func (r *Roster[T]) appendTo(into []T) []T {
	for _, c := range r.tenants {
		into = append(into, c)
	}
	return into
}

// freeSMs is how many SMs partitions can still take: the split's free
// ones and the spares'. The caller holds mu.
func (r *Roster[T]) freeSMs() int { return r.cfg.Split.FreeSMs() + r.spare.SMs() }

// Closed reports whether the pool's Close has begun.
func (r *Roster[T]) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close marks the pool closed, once: first is false where a Close began
// before. The first is given the live tenants, to close, and the spares,
// to let go; the roster keeps none from now on.
func (r *Roster[T]) Close() (live []T, spare *smpart.Spares, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, false
	}
	r.closed = true
	spare, r.spare = r.spare, smpart.NewSpares(nil) // a closed pool keeps none
	return r.appendTo(nil), spare, true
}

// TryFind names a live tenant for which is says yes, "" where none does.
// It only tries the roster's lock, and gives up ("") where it is held: it
// serves the fault path, which runs inside a driver call's return on a
// goroutine that may hold a lock ranked below it (docs/LOCKS.md), so is
// must only try the locks it takes too.
func (r *Roster[T]) TryFind(is func(T) bool) string {
	if !r.mu.TryLock() {
		return ""
	}
	defer r.mu.Unlock()
	for name, c := range r.tenants {
		if is(c) {
			return name
		}
	}
	return ""
}
