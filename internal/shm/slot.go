package shm

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Slot states, kept in the high 32 bits of a slot's state word; the low 32
// bits hold the owner PID. Folding both into one word lets a single
// compare-and-swap both check who owns a slot and take it over.
const (
	StateFree    uint64 = 0
	StateActive  uint64 = 1
	StateReaping uint64 = 2 // sentinel: one reaper owns the cleanup
)

func packState(state uint64, pid int) uint64 { return state<<32 | uint64(uint32(pid)) }
func unpackState(w uint64) (state uint64, pid int) {
	return w >> 32, int(uint32(w))
}

// ErrNoSlot is returned by Join when every slot is taken.
var ErrNoSlot = errors.New("shm: no free slot")

// Slot is one process's membership in a region.
type Slot struct {
	r   *Region
	idx int
	pid int
}

// monotonicNow returns CLOCK_MONOTONIC in nanoseconds. It is one clock for
// the whole machine (unlike Go's per-process monotonic readings) and does
// not jump with wall-clock changes, so heartbeats of different processes
// are comparable.
func monotonicNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("shm: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return uint64(ts.Nano())
}

// Join claims a free slot for process pid (normally os.Getpid()).
func (r *Region) Join(pid int) (*Slot, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("shm: join with pid %d; a positive process id is required", pid)
	}
	for i := 0; i < r.layout.Slots; i++ {
		st := r.stateWord(i)
		if st.Load() != packState(StateFree, 0) {
			continue
		}
		// Beat before claiming so a reaper never sees the new owner
		// with the previous owner's stale heartbeat. If the claim then
		// fails, the fresh beat only delays reaping of the winner's slot.
		r.beatWord(i).Store(monotonicNow())
		if st.CompareAndSwap(packState(StateFree, 0), packState(StateActive, pid)) {
			return &Slot{r: r, idx: i, pid: pid}, nil
		}
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
func (s *Slot) Usage(dev int) Counter {
	s.r.checkDev(dev)
	return s.r.usageWord(s.idx, dev)
}

// Owned reports whether the slot still belongs to this process. It turns
// false if a reaper took it over, for instance after the process stopped
// heartbeating for longer than the reaper timeout; the process must then
// stop using the slot's counters, whose usage was already subtracted.
func (s *Slot) Owned() bool {
	return s.r.stateWord(s.idx).Load() == packState(StateActive, s.pid)
}

// Beat records a heartbeat now. It reports false, writing nothing, if the
// slot is no longer owned.
func (s *Slot) Beat() bool {
	if !s.Owned() {
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
		if onLost != nil {
			onLost()
		}
		return false
	})
}

// Leave removes the slot's usage from the device totals and frees the
// slot, as a reaper would. It reports false if the slot was already reaped.
func (s *Slot) Leave() bool {
	return s.r.reapSlot(s.idx, packState(StateActive, s.pid))
}

// SlotInfo describes a slot for diagnostics.
type SlotInfo struct {
	Index     int
	State     uint64 // StateFree, StateActive or StateReaping
	PID       int
	Heartbeat time.Duration // age of the last heartbeat
	Usage     []uint64      // per device
}

// Slots returns the slots that are not free.
func (r *Region) Slots() []SlotInfo {
	var out []SlotInfo
	now := monotonicNow()
	for i := 0; i < r.layout.Slots; i++ {
		st, pid := unpackState(r.stateWord(i).Load())
		if st == StateFree {
			continue
		}
		si := SlotInfo{Index: i, State: st, PID: pid, Heartbeat: time.Duration(now - min(now, r.beatWord(i).Load()))}
		for d := 0; d < r.layout.Devices; d++ {
			si.Usage = append(si.Usage, r.usageWord(i, d).Load())
		}
		out = append(out, si)
	}
	return out
}

// pidDead reports whether pid certainly does not exist. EPERM means it
// exists but belongs to someone else.
func pidDead(pid int) bool {
	return unix.Kill(pid, 0) == unix.ESRCH
}

// Reap makes one pass over the slots and cleans those whose owner process
// is dead or whose heartbeat is older than timeout. It returns the indexes
// of the slots this call cleaned. Slots of the calling process are never
// reaped by timeout. Any number of processes may reap concurrently: each
// slot is cleaned exactly once.
func (r *Region) Reap(timeout time.Duration) []int {
	var reaped []int
	self := os.Getpid()
	now := monotonicNow()
	for i := 0; i < r.layout.Slots; i++ {
		w := r.stateWord(i).Load()
		st, pid := unpackState(w)
		if st != StateActive {
			continue
		}
		stale := time.Duration(now-min(now, r.beatWord(i).Load())) > timeout
		if !(pid != self && stale) && !pidDead(pid) {
			continue
		}
		if r.reapSlot(i, w) {
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
//  2. subtract: swap each device usage of the slot to 0. The device totals
//     are sums over slots, so this removes the slot's usage from every
//     device total, and only the claimer gets here, so exactly once.
//  3. release: store Free. sync/atomic operations are sequentially
//     consistent in Go's memory model (and the locked x86/arm64
//     instructions they compile to order the shared mapping across
//     processes too), so a process that sees the slot free, and claims
//     it, also sees the zeroed usage.
func (r *Region) reapSlot(i int, owner uint64) bool {
	_, pid := unpackState(owner)
	if !r.stateWord(i).CompareAndSwap(owner, packState(StateReaping, pid)) {
		return false
	}
	for d := 0; d < r.layout.Devices; d++ {
		r.usageWord(i, d).Store(0)
	}
	r.beatWord(i).Store(0)
	r.stateWord(i).Store(packState(StateFree, 0))
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
