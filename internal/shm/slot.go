package shm

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Slot states, kept in the top byte of a slot's state word. The word is
//
//	bits 63..56  state (StateFree, StateActive, StateReaping)
//	bits 47..32  generation: a new one for every Join of the slot
//	bits 31..0   owner PID (in the owner's PID namespace)
//
// Folding all three into one word lets a single compare-and-swap both check
// who owns a slot, and which membership of that owner, and take it over.
const (
	StateFree    uint64 = 0
	StateActive  uint64 = 1
	StateReaping uint64 = 2 // sentinel: one reaper owns the cleanup
)

const (
	genBits   = 16
	genMask   = 1<<genBits - 1
	bytesBits = 64 - genBits
	// MaxUsage is the most bytes a slot can count per device (256 TiB):
	// the top bits of a usage word hold the member's generation.
	MaxUsage = 1<<bytesBits - 1
)

func packState(state uint64, gen uint64, pid int) uint64 {
	return state<<56 | (gen&genMask)<<32 | uint64(uint32(pid))
}

func unpackState(w uint64) (state, gen uint64, pid int) {
	return w >> 56, (w >> 32) & genMask, int(uint32(w))
}

// nextGen is the generation after g; 0 is never used, so a zeroed usage
// word belongs to no member.
func nextGen(g uint64) uint64 {
	g = (g + 1) & genMask
	if g == 0 {
		g = 1
	}
	return g
}

// Identity words, on the slot's state line after the state word: what a
// reaper needs to judge the owner's liveness from another process.
const (
	identNS    = 8  // inode of the owner's PID namespace (/proc/self/ns/pid)
	identStart = 16 // owner's start time, clock ticks after boot (/proc/PID/stat field 22); 0 unknown
	identToken = 24 // random per membership, for diagnostics and for members that share a PID
)

var (
	// ErrNoSlot is returned by Join when every slot is taken.
	ErrNoSlot = errors.New("shared region: no free slot")
	// ErrReaped is returned by a Slot's usage writes once the slot is no
	// longer this member's: a reaper judged the member dead (its heartbeat
	// was older than the timeout, after a long stall say) and gave its
	// usage back. The member must treat its accounting as lost.
	ErrReaped = errors.New("shared region: this process was reaped from the shared region")
	// ErrUsageRange is returned by a usage write that would take a slot's
	// count past MaxUsage.
	ErrUsageRange = errors.New("shared region: usage out of range")
)

// testHookJoinClaimed, if set (by tests), runs in Join right after the slot
// was claimed, before the member's identity is written.
var testHookJoinClaimed func(slot int)

// Slot is one process's membership in a region.
type Slot struct {
	r     *Region
	idx   int
	owner uint64 // the state word while the membership lasts
	token uint64
}

// monotonicNow returns CLOCK_MONOTONIC in nanoseconds. It is one clock for
// the whole machine (unlike Go's per-process monotonic readings) and does
// not jump with wall-clock changes, so heartbeats of different processes
// are comparable.
func monotonicNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("shared region: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return uint64(ts.Nano())
}

// Join claims a free slot for process pid (normally os.Getpid()), which is
// taken to live in the caller's PID namespace.
func (r *Region) Join(pid int) (*Slot, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("shared region: join with pid %d; a positive process id is required", pid)
	}
	return r.join(pid, identity{ns: selfNS(), start: startTime(pid)})
}

func (r *Region) join(pid int, id identity) (*Slot, error) {
	if !r.enter() {
		return nil, fmt.Errorf("%w: join %s after Close", ErrClosed, r.path)
	}
	defer r.exit()
	for i := 0; i < r.layout.Slots; i++ {
		st := r.stateWord(i)
		w := st.Load()
		state, gen, _ := unpackState(w)
		if state != StateFree {
			continue
		}
		// Beat before claiming so a reaper never sees the new owner
		// with the previous owner's stale heartbeat. If the claim then
		// fails, the fresh beat only delays reaping of the winner's slot.
		r.beatWord(i).Store(monotonicNow())
		gen = nextGen(gen)
		owner := packState(StateActive, gen, pid)
		if !st.CompareAndSwap(w, owner) {
			continue
		}
		if testHookJoinClaimed != nil {
			testHookJoinClaimed(i)
		}
		// A free slot may hold what a stale member wrote after it was
		// reaped (or what a crash left behind): the new member starts
		// from zero, and the new generation makes any stale write fail.
		for d := 0; d < r.layout.Devices; d++ {
			r.usageWord(i, d).Store(gen << bytesBits)
		}
		tok := newToken()
		r.word(r.stateOff(i) + identNS).Store(id.ns)
		r.word(r.stateOff(i) + identStart).Store(id.start)
		r.word(r.stateOff(i) + identToken).Store(tok)
		return &Slot{r: r, idx: i, owner: owner, token: tok}, nil
	}
	return nil, fmt.Errorf("%w: all %d slots of %s are in use", ErrNoSlot, r.layout.Slots, r.path)
}

// Index returns the slot's index in the region.
func (s *Slot) Index() int { return s.idx }

// Region returns the region the slot belongs to.
func (s *Slot) Region() *Region { return s.r }

// Usage returns this slot's bytes-in-use counter for device dev. It is the
// process's whole contribution to DeviceUsed(dev): a single word, so there
// is no instant at which a crash leaves the node-wide total inconsistent.
func (s *Slot) Usage(dev int) Usage {
	s.r.checkDev(dev)
	_, gen, _ := unpackState(s.owner)
	return Usage{r: s.r, off: s.r.geo.slotOff + uint64(s.idx)*s.r.geo.slotStride + uint64(1+dev)*lineSize, gen: gen}
}

// Owned reports whether the slot still belongs to this membership. It
// turns false if a reaper took it over, for instance after the process
// stopped heartbeating for longer than the reaper timeout; the slot's
// usage words then refuse this membership's writes with ErrReaped.
func (s *Slot) Owned() bool {
	if !s.r.enter() {
		return false
	}
	defer s.r.exit()
	return s.r.stateWord(s.idx).Load() == s.owner
}

// Beat records a heartbeat now. It reports false, writing nothing, if the
// slot is no longer owned.
func (s *Slot) Beat() bool {
	if !s.r.enter() {
		return false
	}
	defer s.r.exit()
	if s.r.stateWord(s.idx).Load() != s.owner {
		return false
	}
	s.r.beatWord(s.idx).Store(monotonicNow())
	return true
}

// StartHeartbeat beats every interval (1 s if zero) until stop is called.
// If the slot is found reaped, onLost (if non-nil) is called once and the
// heartbeat ends.
func (s *Slot) StartHeartbeat(interval time.Duration, onLost func()) (stop func()) {
	if interval <= 0 {
		interval = time.Second
	}
	return every(interval, func() bool {
		if s.Beat() {
			return true
		}
		if onLost != nil && !s.r.closed() { // a closed region lost nothing
			onLost()
		}
		return false
	})
}

// Leave removes the slot's usage from the device totals and frees the
// slot, as a reaper would. It reports false if the slot was already reaped.
func (s *Slot) Leave() bool {
	if !s.r.enter() {
		return false
	}
	defer s.r.exit()
	return s.r.reapSlot(s.idx, s.owner)
}

// Usage is one member's bytes-in-use word of one device. Its writes check,
// in the same compare-and-swap that changes the count, that the word still
// belongs to the member (the generation in its top bits): a member that was
// reaped cannot write into the slot's next owner's count, and a count can
// never wrap below zero or past MaxUsage.
type Usage struct {
	r   *Region
	off uint64 // of the word in the mapping
	gen uint64
}

// Load returns the bytes counted, 0 once the member was reaped or the
// region closed.
func (u Usage) Load() uint64 {
	if !u.r.enter() {
		return 0
	}
	defer u.r.exit()
	w := u.r.word(u.off).Load()
	if w>>bytesBits != u.gen {
		return 0
	}
	return w & MaxUsage
}

// Add counts n more bytes. It fails with ErrReaped if the slot is no
// longer the member's, with ErrUsageRange past MaxUsage and with ErrClosed
// once the region closed, changing nothing.
func (u Usage) Add(n uint64) error {
	if !u.r.enter() {
		return ErrClosed
	}
	defer u.r.exit()
	c := u.r.word(u.off)
	for {
		w := c.Load()
		if w>>bytesBits != u.gen {
			return ErrReaped
		}
		b := w & MaxUsage
		if n > MaxUsage-b {
			return fmt.Errorf("%w: %d bytes counted, adding %d passes the most a slot counts (%d)", ErrUsageRange, b, n, uint64(MaxUsage))
		}
		if c.CompareAndSwap(w, w+n) {
			return nil
		}
	}
}

// Sub counts n fewer bytes, stopping at zero (a caller that gives back
// more than it counted is wrong, but must not wrap the node-wide total).
// It fails with ErrReaped if the slot is no longer the member's and with
// ErrClosed once the region closed.
func (u Usage) Sub(n uint64) error {
	if !u.r.enter() {
		return ErrClosed
	}
	defer u.r.exit()
	c := u.r.word(u.off)
	for {
		w := c.Load()
		if w>>bytesBits != u.gen {
			return ErrReaped
		}
		if c.CompareAndSwap(w, w-min(n, w&MaxUsage)) {
			return nil
		}
	}
}

// SlotInfo describes a slot for diagnostics.
type SlotInfo struct {
	Index     int
	State     uint64 // StateFree, StateActive or StateReaping
	PID       int
	Heartbeat time.Duration // age of the last heartbeat
	Usage     []uint64      // per device
}

// Slots returns the slots that are not free (none after Close).
func (r *Region) Slots() []SlotInfo {
	if !r.enter() {
		return nil
	}
	defer r.exit()
	var out []SlotInfo
	now := monotonicNow()
	for i := 0; i < r.layout.Slots; i++ {
		st, _, pid := unpackState(r.stateWord(i).Load())
		if st == StateFree {
			continue
		}
		si := SlotInfo{Index: i, State: st, PID: pid, Heartbeat: time.Duration(now - min(now, r.beatWord(i).Load()))}
		for d := 0; d < r.layout.Devices; d++ {
			si.Usage = append(si.Usage, r.usageWord(i, d).Load()&MaxUsage)
		}
		out = append(out, si)
	}
	return out
}

// Reap makes one pass over the slots and cleans those whose owner is
// certainly dead or whose heartbeat is older than timeout. It returns the
// indexes of the slots this call cleaned. Any number of processes may reap
// concurrently: each slot is cleaned exactly once.
//
// A PID says something only in the namespace it was taken in: for an owner
// in the caller's PID namespace, a PID that is gone, or taken by a process
// started at another time, means the owner died; for an owner in another
// namespace (another container sharing /dev/shm) the PID is not checked and
// the heartbeat alone decides. The caller's own memberships (same
// namespace, same PID) are never reaped by timeout: a stalled process
// finds out through its heartbeat instead.
func (r *Region) Reap(timeout time.Duration) []int {
	return r.reap(timeout, selfNS(), os.Getpid())
}

func (r *Region) reap(timeout time.Duration, ns uint64, self int) []int {
	if !r.enter() {
		return nil
	}
	defer r.exit()
	var reaped []int
	now := monotonicNow()
	for i := 0; i < r.layout.Slots; i++ {
		w := r.stateWord(i).Load()
		st, _, pid := unpackState(w)
		if st != StateActive {
			continue
		}
		stale := time.Duration(now-min(now, r.beatWord(i).Load())) > timeout
		ownNS := r.word(r.stateOff(i)+identNS).Load() == ns
		var dead bool
		switch {
		case ownNS && pid == self:
			dead = false // ourselves: alive, however late the beat
		case ownNS:
			dead = stale || !alive(pid, r.word(r.stateOff(i)+identStart).Load())
		default:
			dead = stale
		}
		if dead && r.reapSlot(i, w) {
			reaped = append(reaped, i)
		}
	}
	return reaped
}

// reapSlot cleans slot i if its state word is still owner, in three
// phases:
//
//  1. claim: CAS the state word from owner to the Reaping sentinel. Of
//     any number of reapers (and the owner's own Leave) exactly one wins;
//     the others see a changed word and skip the slot.
//  2. subtract: store 0, of no generation, in each device usage of the
//     slot. The device totals are sums over active slots, so this removes
//     the slot's usage from every device total, and only the claimer gets
//     here, so exactly once. The owner's later writes fail (ErrReaped).
//  3. release: store Free, keeping the generation so that the next Join
//     picks a new one. sync/atomic operations are sequentially consistent
//     in Go's memory model (and the locked x86/arm64 instructions they
//     compile to order the shared mapping across processes too).
func (r *Region) reapSlot(i int, owner uint64) bool {
	_, gen, pid := unpackState(owner)
	if !r.stateWord(i).CompareAndSwap(owner, packState(StateReaping, gen, pid)) {
		return false
	}
	for d := 0; d < r.layout.Devices; d++ {
		r.usageWord(i, d).Store(0)
	}
	r.beatWord(i).Store(0)
	r.stateWord(i).Store(packState(StateFree, gen, 0))
	return true
}

// StartReaper runs Reap every interval (timeout/2 if zero) until stop is
// called. onReap, if non-nil, is called with the slots each pass cleaned.
func (r *Region) StartReaper(interval, timeout time.Duration, onReap func([]int)) (stop func()) {
	if interval <= 0 {
		interval = timeout / 2
	}
	return every(interval, func() bool {
		if s := r.Reap(timeout); len(s) > 0 && onReap != nil {
			onReap(s)
		}
		return true
	})
}

// every runs f each interval on its own goroutine until f returns false or
// stop is called; stop waits for the goroutine and may be called twice.
func every(interval time.Duration, f func() bool) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				if !f() {
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-finished
	}
}
