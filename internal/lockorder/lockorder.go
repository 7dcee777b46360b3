// Package lockorder gives the SDK's main mutexes their place in its one
// lock order (docs/LOCKS.md, the lock map) and checks it where a test
// asks: a Mutex[L] is a sync.Mutex of rank L, and once Enable has been
// called (a package's tests do so in an init function) every Lock is
// checked against the ranks its goroutine holds. Taking a lock whose rank
// is not above every rank held is reported, as is a driver call (Driver,
// called by a test's guard around its simulated driver) made while holding
// a lock that may not be held across one. A TryLock never waits, so it
// may be taken out of order (the fault path names a tenant so); what it
// took is held all the same.
//
// Disabled, which production always is, a Mutex is a sync.Mutex and a
// load of one bool that never changes; nothing is recorded.
package lockorder

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Rank is a lock's level: a goroutine takes locks in increasing rank.
type Rank uint8

// The ranks, outermost first. docs/LOCKS.md says what each guards.
const (
	_ Rank = iota
	rankTenantClosing
	rankPoolMove
	rankPoolProbe
	rankPoolMu
	rankMoveMembers
	rankTenantMu
	rankPartition
	rankSplit
	rankDevice
	rankGreens
	rankPeers
	rankAlone
	rankCharge
	rankInfo
	rankTracker
	rankAdmPool
	rankAdmTenant
	rankAdmDoMeter
	rankAdmMeter
	rankAdmRun
	nranks
)

// rankDesc is what the check knows of a rank.
type rankDesc struct {
	name string
	// noDriver: no driver call may be made while it is held.
	noDriver bool
	// drains: a move may wait for tenants' calls in flight while it is
	// held (Draining); no other lock may be held then.
	drains bool
}

var ranks = [nranks]rankDesc{
	rankTenantClosing: {name: "fcsp tenantCore.closing"},
	rankPoolMove:      {name: "smmove Engine.move", drains: true},
	rankPoolProbe:     {name: "smprobe Kernel.mu"},
	rankPoolMu:        {name: "tenancy Roster.mu", noDriver: true},
	rankMoveMembers:   {name: "smmove Engine.mu", noDriver: true},
	rankTenantMu:      {name: "fcsp tenantCore.mu", noDriver: true},
	rankPartition:     {name: "smpart Partition.mu"},
	rankSplit:         {name: "smpart Split.mu", noDriver: true},
	rankDevice:        {name: "smpart Device.mu"},
	rankGreens:        {name: "smpart greens.mu", noDriver: true},
	rankPeers:         {name: "devmem Peers.mu", noDriver: true},
	rankAlone:         {name: "devmem Peers.alone"},
	rankCharge:        {name: "devmem charge.mu"},
	rankInfo:          {name: "devmem InfoCache.mu"},
	rankTracker:       {name: "memtrack Tracker.mu", noDriver: true},
	rankAdmPool:       {name: "admission Pool.mu", noDriver: true},
	rankAdmTenant:     {name: "admission Tenant.mu", noDriver: true},
	rankAdmDoMeter:    {name: "admission doMeter.mu", noDriver: true},
	rankAdmMeter:      {name: "admission meter.mu"},
	rankAdmRun:        {name: "admission Run.mu", noDriver: true},
}

func (r Rank) String() string {
	if r > 0 && r < nranks {
		return ranks[r].name
	}
	return "rank " + strconv.Itoa(int(r))
}

// Level names a rank as a type, so that a Mutex's zero value has its
// rank: Mutex[PoolMu].
type Level interface{ rank() Rank }

// The levels, one per rank.
type (
	TenantClosing struct{}
	PoolMove      struct{}
	PoolProbe     struct{}
	PoolMu        struct{}
	MoveMembers   struct{}
	TenantMu      struct{}
	Partition     struct{}
	Split         struct{}
	Device        struct{}
	Greens        struct{}
	Peers         struct{}
	Alone         struct{}
	Charge        struct{}
	Info          struct{}
	Tracker       struct{}
	AdmPool       struct{}
	AdmTenant     struct{}
	AdmDoMeter    struct{}
	AdmMeter      struct{}
	AdmRun        struct{}
)

func (TenantClosing) rank() Rank { return rankTenantClosing }
func (PoolMove) rank() Rank      { return rankPoolMove }
func (PoolProbe) rank() Rank     { return rankPoolProbe }
func (PoolMu) rank() Rank        { return rankPoolMu }
func (MoveMembers) rank() Rank   { return rankMoveMembers }
func (TenantMu) rank() Rank      { return rankTenantMu }
func (Partition) rank() Rank     { return rankPartition }
func (Split) rank() Rank         { return rankSplit }
func (Device) rank() Rank        { return rankDevice }
func (Greens) rank() Rank        { return rankGreens }
func (Peers) rank() Rank         { return rankPeers }
func (Alone) rank() Rank         { return rankAlone }
func (Charge) rank() Rank        { return rankCharge }
func (Info) rank() Rank          { return rankInfo }
func (Tracker) rank() Rank       { return rankTracker }
func (AdmPool) rank() Rank       { return rankAdmPool }
func (AdmTenant) rank() Rank     { return rankAdmTenant }
func (AdmDoMeter) rank() Rank    { return rankAdmDoMeter }
func (AdmMeter) rank() Rank      { return rankAdmMeter }
func (AdmRun) rank() Rank        { return rankAdmRun }

// Mutex is a sync.Mutex of rank L. Its zero value is unlocked.
type Mutex[L Level] struct{ m sync.Mutex }

// Lock locks m, checked against the goroutine's locks where enabled.
func (m *Mutex[L]) Lock() {
	if on {
		var l L
		check(unsafe.Pointer(m), l.rank()) // before it waits: a deadlock is reported first
		m.m.Lock()
		held(unsafe.Pointer(m), l.rank())
		return
	}
	m.m.Lock()
}

// TryLock locks m where it is free, as sync.Mutex.TryLock; it waits for
// nothing, so no rank refuses it.
func (m *Mutex[L]) TryLock() bool {
	if !m.m.TryLock() {
		return false
	}
	taken[L](unsafe.Pointer(m))
	return true
}

// Unlock unlocks m, from any goroutine, as sync.Mutex.Unlock.
func (m *Mutex[L]) Unlock() {
	if on {
		release(unsafe.Pointer(m))
	}
	m.m.Unlock()
}

// taken records lock p, of L's rank, as the calling goroutine's, where
// the checks are on.
func taken[L Level](p unsafe.Pointer) {
	if on {
		var l L
		held(p, l.rank())
	}
}

// Sem is a lock of rank L whose waiters may give up: a one-token channel,
// so that a wait for it ends with its context. Its zero value is
// unlocked, once Init has run (before it is shared).
type Sem[L Level] struct{ ch chan struct{} }

// Init makes s ready; call it once, before s is shared.
func (s *Sem[L]) Init() { s.ch = make(chan struct{}, 1) }

// TryLock takes s where it is free.
func (s *Sem[L]) TryLock() bool {
	select {
	case s.ch <- struct{}{}:
		taken[L](unsafe.Pointer(s))
		return true
	default:
		return false
	}
}

// Lock takes s, waiting while done stays open (a context's Done; nil:
// for good); false where done closed first. Waiters are served in the
// order they came.
func (s *Sem[L]) Lock(done <-chan struct{}) bool {
	if on {
		var l L
		check(unsafe.Pointer(s), l.rank())
	}
	select {
	case s.ch <- struct{}{}:
	case <-done:
		return false
	}
	taken[L](unsafe.Pointer(s))
	return true
}

// Unlock lets s go, from any goroutine.
func (s *Sem[L]) Unlock() {
	if on {
		release(unsafe.Pointer(s))
	}
	<-s.ch
}

// Draining reports a move about to wait for tenants' calls in flight
// while its goroutine holds a lock other than those that allow it (the
// move lock): a call it waits for could be waiting for that lock. It does
// nothing unless enabled.
func Draining() {
	if !on {
		return
	}
	var msg string
	g := goid()
	state.mu.Lock()
	if hs := state.held[g]; hs != nil {
		for _, h := range hs.h {
			if !ranks[h.rank].drains {
				msg = fmt.Sprintf("lock order: a move waits for calls in flight while holding %v; it may hold only the move lock then", h.rank)
				break
			}
		}
	}
	state.mu.Unlock()
	if msg != "" {
		violation(msg)
	}
}

// on is set by Enable, before any goroutine takes a lock, and never
// cleared: a plain bool, read on every Lock.
var on bool

// Enable turns the checks on for the rest of the process; report hears
// each violation, with the stack of the goroutine that made it. Call it
// before any goroutine takes a Mutex (a test's init function).
func Enable(report func(msg string)) {
	state.report = report
	state.held = map[uintptr]*holds{}
	state.owner = map[unsafe.Pointer]uintptr{}
	on = true
}

// Enabled reports whether Enable has been called.
func Enabled() bool { return on }

// Violations counts the violations reported since Enable.
func Violations() int64 { return state.violations.Load() }

// state is the check's: which locks each goroutine holds, and who holds
// each lock (a sync.Mutex may be unlocked by another goroutine).
var state struct {
	mu         sync.Mutex
	held       map[uintptr]*holds
	owner      map[unsafe.Pointer]uintptr
	spare      []*holds // emptied, for the next goroutine: a lock taken allocates nothing
	report     func(msg string)
	violations atomic.Int64
}

type hold struct {
	m    unsafe.Pointer
	rank Rank
}

type holds struct{ h []hold }

// check reports taking m, of rank r, where the calling goroutine holds m
// already or a lock of rank r or above.
func check(m unsafe.Pointer, r Rank) {
	var msg string
	g := goid()
	state.mu.Lock()
	if hs := state.held[g]; hs != nil {
		for _, h := range hs.h {
			if h.m == m {
				msg = fmt.Sprintf("lock order: %v taken twice by one goroutine", r)
				break
			}
			if h.rank >= r {
				msg = fmt.Sprintf("lock order: %v (rank %d) taken while holding %v (rank %d); take it first", r, r, h.rank, h.rank)
				break
			}
		}
	}
	state.mu.Unlock()
	if msg != "" {
		violation(msg)
	}
}

// held records that the calling goroutine holds m, of rank r: once it
// does (recorded before, a lock still waited for would be the waiter's,
// and the holder's unlock would clear the wrong goroutine's record).
func held(m unsafe.Pointer, r Rank) {
	g := goid()
	state.mu.Lock()
	defer state.mu.Unlock()
	hs := state.held[g]
	if hs == nil {
		if n := len(state.spare); n > 0 {
			hs, state.spare = state.spare[n-1], state.spare[:n-1]
		} else {
			hs = &holds{}
		}
		state.held[g] = hs
	}
	hs.h = append(hs.h, hold{m, r})
	state.owner[m] = g
}

func release(m unsafe.Pointer) {
	state.mu.Lock()
	defer state.mu.Unlock()
	g, ok := state.owner[m]
	if !ok {
		return // locked before Enable
	}
	delete(state.owner, m)
	hs := state.held[g]
	for i := len(hs.h) - 1; i >= 0; i-- {
		if hs.h[i].m == m {
			hs.h = append(hs.h[:i], hs.h[i+1:]...)
			break
		}
	}
	if len(hs.h) == 0 {
		delete(state.held, g)
		state.spare = append(state.spare, hs)
	}
}

// Driver reports a driver call (op) made while the calling goroutine
// holds a lock that may not be held across one. A test's guard around its
// driver calls it before each call; it does nothing unless enabled.
func Driver(op string) {
	if !on {
		return
	}
	var msg string
	g := goid()
	state.mu.Lock()
	if hs := state.held[g]; hs != nil {
		for _, h := range hs.h {
			if ranks[h.rank].noDriver {
				msg = fmt.Sprintf("lock order: driver call %s made while holding %v, which no driver call may be made under", op, h.rank)
				break
			}
		}
	}
	state.mu.Unlock()
	if msg != "" {
		violation(msg)
	}
}

func violation(msg string) {
	state.violations.Add(1)
	buf := make([]byte, 16<<10)
	buf = buf[:runtime.Stack(buf, false)]
	state.report(msg + "\n" + string(buf))
}
