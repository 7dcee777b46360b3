package shm

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Slot states, kept in the top byte of a slot's state word. The word is
//
//	bits 63..56  state (StateFree, StateJoining, StateActive, StateReaping)
//	bits 55..0   generation: a new one for every Join of the slot
//
// One compare-and-swap of the word both checks which membership holds the
// slot and moves it on. A Join goes Free -> Joining -> Active: the slot is
// published active only after the member's identity and usage words carry
// its generation, so that a reaper never judges a member by its
// predecessor's identity.
const (
	StateFree    uint64 = 0
	StateActive  uint64 = 1
	StateReaping uint64 = 2 // sentinel: one reaper owns the cleanup
	StateJoining uint64 = 3 // claimed; identity and usage being written
)

const (
	stateShift = 56
	// 56 bits of generation never come round: a member stopped while its
	// slot has 2^56 memberships is not a case to plan for. 16 bits did,
	// after 65,535 joins, and a late free of the stopped member then
	// landed in the live member's count.
	genBits = 56
	genMask = 1<<genBits - 1
	// The usage and identity words carry the low tagBits of their
	// member's generation in their top bits, and a value below them. The
	// tag is what makes a usage write one compare-and-swap that checks
	// ownership; Usage.Add and Sub check the whole generation in the
	// state word first, so a stale member's write could land only if it
	// stopped between that check and its CAS while the slot went through
	// a multiple of 2^20 memberships.
	tagBits   = 20
	tagMask   = 1<<tagBits - 1
	valueBits = 64 - tagBits
	valueMask = 1<<valueBits - 1
	// MaxUsage is the most bytes a slot can count per device (16 TiB):
	// the top bits of a usage word hold the member's generation tag.
	MaxUsage = valueMask
)

func packState(state, gen uint64) uint64 { return state<<stateShift | gen&genMask }

func unpackState(w uint64) (state, gen uint64) { return w >> stateShift, w & genMask }

// tagged is value v in a word of the membership of generation gen.
func tagged(gen, v uint64) uint64 { return (gen&tagMask)<<valueBits | v&valueMask }

// ofGen reports whether word w was written by the membership of generation
// gen, and returns its value.
func ofGen(w, gen uint64) (v uint64, ok bool) {
	return w & valueMask, w>>valueBits == gen&tagMask
}

// nextGen is the generation after g. A generation whose tag is 0 is never
// used, so a zeroed word belongs to no member.
func nextGen(g uint64) uint64 {
	g = (g + 1) & genMask
	for g&tagMask == 0 {
		g = (g + 1) & genMask
	}
	return g
}

// Identity words, on the slot's state line after the state word: what a
// reaper needs to judge the owner's liveness from another process. All but
// the token carry the owner's generation tag (see tagged): a reaper trusts
// them only for the membership whose generation is in the state word.
const (
	identNS    = 8  // inode of the owner's PID namespace (/proc/self/ns/pid), low valueBits
	identStart = 16 // owner's start time, clock ticks after boot (/proc/PID/stat field 22); 0 unknown
	identPID   = 24 // owner's PID, in the owner's namespace
	identToken = 32 // random per membership, for diagnostics and for members that share a PID; untagged
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

func (r *Region) join(pid int, id identity) (_ *Slot, err error) {
	if !r.enter() {
		if err := r.Lost(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: join %s after Close", ErrClosed, r.path)
	}
	defer r.exit(debug.SetPanicOnFault(true), &err)
	for i := 0; i < r.layout.Slots; i++ {
		st := r.stateWord(i)
		w := st.Load()
		state, gen := unpackState(w)
		if state != StateFree {
			continue
		}
		// Beat before claiming so a reaper never sees the new owner
		// with the previous owner's stale heartbeat. If the claim then
		// fails, the fresh beat only delays reaping of the winner's slot.
		r.beatWord(i).Store(monotonicNow())
		gen = nextGen(gen)
		joining := packState(StateJoining, gen)
		if !st.CompareAndSwap(w, joining) {
			continue
		}
		if testHookJoinClaimed != nil {
			testHookJoinClaimed(i)
		}
		// While the slot is joining a reaper judges it by its heartbeat
		// alone. The identity goes in first, each word tagged with the
		// new generation; a free slot's usage words may hold what a
		// crash left behind, so the member starts from zero.
		off := r.stateOff(i)
		ok := r.initWord(i, off+identNS, joining, tagged(gen, id.ns)) &&
			r.initWord(i, off+identStart, joining, tagged(gen, id.start)) &&
			r.initWord(i, off+identPID, joining, tagged(gen, uint64(uint32(pid))))
		for d := 0; ok && d < r.layout.Devices; d++ {
			ok = r.initWord(i, off+uint64(1+d)*lineSize, joining, tagged(gen, 0))
		}
		tok := newToken()
		r.word(off + identToken).Store(tok)
		// Not ok, or the CAS fails: a reaper found this join's heartbeat
		// stale (the joiner stalled past the timeout) and frees the slot.
		if !ok || !st.CompareAndSwap(joining, packState(StateActive, gen)) {
			continue
		}
		return &Slot{r: r, idx: i, owner: packState(StateActive, gen), token: tok}, nil
	}
	return nil, fmt.Errorf("%w: all %d slots of %s are in use", ErrNoSlot, r.layout.Slots, r.path)
}

// initWord stores v at off, a word of slot i, while the slot's state is
// joining, and reports false once it is not (the join lost the slot to a
// reaper). The compare-and-swap against the word's value read after the
// state check keeps a joiner that stalled in between (and lost the slot
// meanwhile) from overwriting what a later joiner of the slot wrote: the
// word no longer holds the value it read.
func (r *Region) initWord(i int, off, joining, v uint64) bool {
	c := r.word(off)
	for {
		old := c.Load()
		if r.stateWord(i).Load() != joining {
			return false
		}
		if c.CompareAndSwap(old, v) {
			return true
		}
	}
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
	_, gen := unpackState(s.owner)
	off := s.r.stateOff(s.idx)
	return Usage{r: s.r, off: off + uint64(1+dev)*lineSize, state: off, gen: gen}
}

// Owned reports whether the slot still belongs to this membership. It
// turns false if a reaper took it over, for instance after the process
// stopped heartbeating for longer than the reaper timeout; the slot's
// usage words then refuse this membership's writes with ErrReaped.
func (s *Slot) Owned() bool {
	if !s.r.enter() {
		return false
	}
	defer s.r.exit(debug.SetPanicOnFault(true), nil)
	return s.r.stateWord(s.idx).Load() == s.owner
}

// Beat records a heartbeat now. It reports false, writing nothing, if the
// slot is no longer owned.
func (s *Slot) Beat() bool {
	if !s.r.enter() {
		return false
	}
	defer s.r.exit(debug.SetPanicOnFault(true), nil)
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
	defer s.r.exit(debug.SetPanicOnFault(true), nil)
	return s.r.reapSlot(s.idx, s.owner)
}

// Usage is one member's bytes-in-use word of one device. Its writes check
// that the slot's state word still holds the member's generation, and then,
// in the same compare-and-swap that changes the count, that the word still
// carries the member's generation tag (in its top bits): a member that was
// reaped cannot write into the slot's next owner's count, and a count can
// never wrap below zero or past MaxUsage.
type Usage struct {
	r     *Region
	off   uint64 // of the word in the mapping
	state uint64 // offset of the slot's state word
	gen   uint64
}

// owned reports whether the slot's state word still names the member's
// membership, whole generation and all.
func (u Usage) owned() bool {
	return u.r.word(u.state).Load() == packState(StateActive, u.gen)
}

// Load returns the bytes counted, 0 once the member was reaped or the
// region closed.
func (u Usage) Load() uint64 {
	if !u.r.enter() {
		return 0
	}
	defer u.r.exit(debug.SetPanicOnFault(true), nil)
	v, ok := ofGen(u.r.word(u.off).Load(), u.gen)
	if !ok || !u.owned() {
		return 0
	}
	return v
}

// Add counts n more bytes. It fails with ErrReaped if the slot is no
// longer the member's, with ErrUsageRange past MaxUsage and with ErrClosed
// once the region closed, changing nothing.
func (u Usage) Add(n uint64) (err error) {
	if !u.r.enter() {
		return u.r.stopped()
	}
	defer u.r.exit(debug.SetPanicOnFault(true), &err)
	c := u.r.word(u.off)
	for {
		// The state word first: the tag alone is a few bits of the
		// generation (see tagBits).
		if !u.owned() {
			return ErrReaped
		}
		w := c.Load()
		b, ok := ofGen(w, u.gen)
		if !ok {
			return ErrReaped
		}
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
func (u Usage) Sub(n uint64) (err error) {
	if !u.r.enter() {
		return u.r.stopped()
	}
	defer u.r.exit(debug.SetPanicOnFault(true), &err)
	c := u.r.word(u.off)
	for {
		// The state word first: the tag alone is a few bits of the
		// generation (see tagBits).
		if !u.owned() {
			return ErrReaped
		}
		w := c.Load()
		b, ok := ofGen(w, u.gen)
		if !ok {
			return ErrReaped
		}
		if c.CompareAndSwap(w, w-min(n, b)) {
			return nil
		}
	}
}

// SlotInfo describes a slot for diagnostics.
type SlotInfo struct {
	Index     int
	State     uint64        // StateJoining, StateActive or StateReaping
	PID       int           // 0 while the slot holds no identity of its member
	Heartbeat time.Duration // age of the last heartbeat
	Usage     []uint64      // per device
}

// Slots returns the slots that are not free (none after Close).
func (r *Region) Slots() []SlotInfo {
	if !r.enter() {
		return nil
	}
	defer r.exit(debug.SetPanicOnFault(true), nil)
	var out []SlotInfo
	now := monotonicNow()
	for i := 0; i < r.layout.Slots; i++ {
		st, gen := unpackState(r.stateWord(i).Load())
		if st == StateFree {
			continue
		}
		pid, _ := ofGen(r.word(r.stateOff(i)+identPID).Load(), gen)
		si := SlotInfo{Index: i, State: st, PID: int(pid), Heartbeat: time.Duration(now - min(now, r.beatWord(i).Load()))}
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
// the heartbeat alone decides, and so it does for a slot whose member is
// still joining (its identity may not be written yet). The caller's own
// memberships (same namespace, same PID, same start time) are never reaped
// by timeout: a stalled process finds out through its heartbeat instead. A
// membership of the caller's namespace and PID with another start time is
// a predecessor's (a restarted container's PID 1), and dead.
func (r *Region) Reap(timeout time.Duration) []int {
	return r.reap(timeout, selfNS(), os.Getpid())
}

func (r *Region) reap(timeout time.Duration, ns uint64, self int) (reaped []int) {
	if !r.enter() {
		return nil
	}
	defer r.exit(debug.SetPanicOnFault(true), nil)
	now := monotonicNow()
	for i := 0; i < r.layout.Slots; i++ {
		w := r.stateWord(i).Load()
		st, gen := unpackState(w)
		if st != StateActive && st != StateJoining {
			continue
		}
		stale := time.Duration(now-min(now, r.beatWord(i).Load())) > timeout
		// The identity counts only if every word of it is this
		// membership's: a slot that is joining may still hold its
		// previous owner's, and judging the new member by the old start
		// time would reap a live process.
		off := r.stateOff(i)
		mns, ok1 := ofGen(r.word(off+identNS).Load(), gen)
		start, ok2 := ofGen(r.word(off+identStart).Load(), gen)
		pid, ok3 := ofGen(r.word(off+identPID).Load(), gen)
		known := ok1 && ok2 && ok3
		ownNS := known && mns == ns&valueMask
		var dead bool
		switch {
		case ownNS && int(pid) == self:
			// Ourselves, alive however late the beat, unless the start
			// time says another process held our PID in our namespace
			// before us (a restarted container's PID 1): that one is dead.
			dead = !alive(int(pid), start)
		case ownNS && st == StateActive:
			dead = stale || !alive(int(pid), start)
		default: // joining, or another namespace's: the heartbeat decides
			dead = stale
		}
		if dead && r.reapSlot(i, w) {
			reaped = append(reaped, i)
		}
	}
	return reaped
}

// reapSlot cleans slot i if its state word is still owner (a joining or
// active membership), in three phases:
//
//  1. claim: CAS the state word from owner to the Reaping sentinel. Of
//     any number of reapers (and the owner's own Leave) exactly one wins;
//     the others see a changed word and skip the slot.
//  2. subtract: store 0, of no generation, in each device usage of the
//     slot. The device totals are sums over active slots, so this removes
//     the slot's usage from every device total, and only the claimer gets
//     here, so exactly once. The owner's later writes fail (ErrReaped),
//     and so does a join still writing the slot's words.
//  3. release: store Free, keeping the generation so that the next Join
//     picks a new one. sync/atomic operations are sequentially consistent
//     in Go's memory model (and the locked x86/arm64 instructions they
//     compile to order the shared mapping across processes too).
func (r *Region) reapSlot(i int, owner uint64) bool {
	_, gen := unpackState(owner)
	if !r.stateWord(i).CompareAndSwap(owner, packState(StateReaping, gen)) {
		return false
	}
	for d := 0; d < r.layout.Devices; d++ {
		r.usageWord(i, d).Store(0)
	}
	r.beatWord(i).Store(0)
	r.stateWord(i).Store(packState(StateFree, gen))
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
