package memtrack

import (
	"time"

	"github.com/fcsp-go/fcsp-go/internal/spin"
)

// Leases of device headroom.
//
// Charging every allocation to the one device counter makes that counter's
// cache line the meeting point of every core that allocates, whatever the
// tenant: on 16 cores its P99 under 64 goroutines was tens of microseconds.
// So each account leases headroom from the device counter in chunks and
// charges its allocations against its own lease, a word on its own cache
// line. The device counter then holds allocations plus leases, and it still
// never passes the limit, so the sum of allocations never does either.
//
// A lease must not make the device look full when it is not. Two rules keep
// refusals honest:
//   - a chunk is taken only while the device has room for every open
//     account to hold one (so leases never crowd out an exact request), and
//   - before refusing, a reservation takes every account's lease back to
//     the device and tries again, and if that fails, settles the request
//     exactly: with new leases stopped and every lease drained (exact). A
//     refusal means the device counter was full after the leases were
//     returned, i.e. full of allocations (plus bytes freed after the
//     drain, which were allocations a moment before).
//
// With WithShared the lease is off (chunk 0): the region's reaper clears a
// process's slot, and bytes leased but not allocated would have to be kept
// apart there. Each Reserve then charges the slot directly, as before.

// leaseClosed is set in an account's lease word by Close, so that a lease
// added after Close saw the word is refused by the add's compare-and-swap
// and handed straight back to the device instead of being stranded.
const leaseClosed = uint64(1) << 63

// maxLeaseChunk caps the chunk: 64 MiB, a few large allocations of an
// inference server, small next to a GPU.
const maxLeaseChunk = 64 << 20

// leaseChunkFor is the default chunk for a device limit: 1/1024 of the
// device, at most maxLeaseChunk; 0 (no leases) for limits under 1 MiB,
// where chunks would be too coarse to be worth the bookkeeping.
func leaseChunkFor(limit uint64) uint64 {
	c := limit >> 10
	if c > maxLeaseChunk {
		c = maxLeaseChunk
	}
	if c < 1<<10 {
		return 0
	}
	return c
}

// WithLeaseChunk sets how many bytes of device headroom an account leases
// at a time (0: no leases, every reservation charges the device counter; at
// most the device limit). It exists for tests and benchmarks; the default
// suits a GPU.
func WithLeaseChunk(chunk uint64) Option {
	return func(t *Tracker) error {
		t.chunk, t.chunkSet = chunk, true
		return nil
	}
}

// devTake charges n bytes of a reservation of a against the device: from
// its lease if it holds enough, else from the device counter, taking a new
// chunk with it while there is room for one. On failure it returns the
// device usage seen by the check that failed (see exact).
func (a *Account) devTake(n uint64) (used uint64, ok bool, err error) {
	t := a.t
	if t.chunk == 0 {
		return t.devReserve(n)
	}
	// Fast path: the lease covers n; only this tenant's line is written.
	for {
		l := a.lease.Load()
		if l&leaseClosed != 0 || l < n {
			break
		}
		if a.lease.CompareAndSwap(l, l-n) {
			return 0, true, nil
		}
	}
	if a.refill(n) {
		return 0, true, nil
	}
	// The device counter is full. Take every lease back and retry once;
	// if other tenants re-leased what was taken meanwhile, settle it
	// exactly.
	if t.reclaim() > 0 {
		if _, ok, _ := t.devReserve(n); ok {
			return 0, true, nil
		}
	}
	return t.exact(n)
}

// refill charges n bytes the lease does not cover: what is left of the
// lease plus the rest from the device counter, taking a new chunk along
// while every open account could hold one. It reports false, changing
// nothing, if the device counter has no room for the rest.
//
// It counts itself in t.grabbing for its whole run: the bytes it takes out
// of the lease, and the chunk it takes, are in no lease for a moment, and
// exact waits for them. Once exact has begun (t.draining) it takes no
// chunk and leaves its lease in place for exact to drain; see refillExact.
// The count goes up before the second look at t.draining, and exact sets
// t.draining before it reads the count (all sequentially consistent), so
// either exact waits for this refill or this refill sees exact.
func (a *Account) refill(n uint64) bool {
	t := a.t
	if t.draining.Load() {
		return a.refillExact(n)
	}
	t.grabbing.Add(1)
	if t.draining.Load() {
		t.grabbing.Add(-1) // not counted: exact must not wait for it
		return a.refillExact(n)
	}
	defer t.grabbing.Add(-1)
	have := a.takeLease() // what is left of the lease counts towards n
	if have >= n {        // a release refilled it since the fast path looked
		if have > n {
			a.putLease(have - n)
		}
		return true
	}
	need := n - have
	if spare := t.limit - min(t.limit, t.dev.Load()); spare >= need && (spare-need)/uint64(t.n.Load()+1) >= t.chunk {
		if _, ok, _ := t.devReserve(need + t.chunk); ok { // no error: leases are off with a shared region
			a.putLease(t.chunk)
			return true
		}
	}
	if _, ok, _ := t.devReserve(need); ok {
		return true
	}
	t.devRelease(have)
	return false
}

// refillExact is refill while exact runs: it charges the device for what
// the lease does not cover first and only then consumes the lease, by a
// compare-and-swap, so that no byte of the lease is ever in transit where
// exact could neither drain it nor tell it from an allocation.
func (a *Account) refillExact(n uint64) bool {
	t := a.t
	for {
		l := a.lease.Load()
		if l&leaseClosed != 0 {
			l = 0
		}
		if l >= n {
			if a.lease.CompareAndSwap(l, l-n) {
				return true
			}
			continue
		}
		if _, ok, _ := t.devReserve(n - l); !ok {
			return false
		}
		if l == 0 || a.lease.CompareAndSwap(l, 0) {
			return true
		}
		t.devRelease(n - l) // the lease changed (drained, or a free): again
	}
}

// exact admits n bytes against the device counter with every lease drained
// and no new lease taken, so that a refusal means the device is full of
// allocations (and of bytes freed into leases after the drain, which were
// allocations a moment before). Under t.mu it stops chunk grabs
// (t.draining), waits for the refills already running (t.grabbing), takes
// every lease back, and reserves. The usage it returns on failure is the
// one its failing check saw, so the refusal's message agrees with itself.
//
// A free that lands in a lease during the drain may refill it; exact
// drains again while the drains find bytes, a few times at most.
func (t *Tracker) exact(n uint64) (used uint64, ok bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.draining.Store(true)
	defer t.draining.Store(false)
	spin.Until(func() bool { return t.grabbing.Load() == 0 }, time.Microsecond)
	for range 4 {
		got := t.drainLocked()
		if used, ok, err = t.devReserve(n); ok || got == 0 {
			return used, ok, err
		}
	}
	return used, ok, err
}

// devGive returns n bytes of a's allocations to the device: into its lease,
// keeping at most one chunk there, the excess to the device counter.
func (a *Account) devGive(n uint64) {
	t := a.t
	if t.chunk == 0 {
		t.devRelease(n)
		return
	}
	for {
		l := a.lease.Load()
		if l&leaseClosed != 0 {
			t.devRelease(n)
			return
		}
		keep := min(l+n, t.chunk)
		if a.lease.CompareAndSwap(l, keep) {
			if back := l + n - keep; back > 0 {
				t.devRelease(back)
			}
			return
		}
	}
}

// takeLease empties a's lease and returns what it held (0 once closed).
func (a *Account) takeLease() uint64 {
	for {
		l := a.lease.Load()
		if l&leaseClosed != 0 || l == 0 {
			return 0
		}
		if a.lease.CompareAndSwap(l, 0) {
			return l
		}
	}
}

// putLease adds n leased bytes to a's lease, or gives them back to the
// device if a was closed meanwhile.
func (a *Account) putLease(n uint64) {
	for {
		l := a.lease.Load()
		if l&leaseClosed != 0 {
			a.t.devRelease(n)
			return
		}
		if a.lease.CompareAndSwap(l, l+n) {
			return
		}
	}
}

// closeLease marks a's lease closed and gives what it held to the device.
// It runs under t.mu, so that exact never sees the lease's bytes between
// the two.
func (a *Account) closeLease() {
	if l := a.lease.Swap(leaseClosed) &^ leaseClosed; l > 0 {
		a.t.devRelease(l)
	}
}

// reclaim takes every open account's lease back to the device and returns
// the bytes it took. It runs only when a reservation found the device
// counter full, so the lock and the walk are off the hot path.
func (t *Tracker) reclaim() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.drainLocked()
}

// drainLocked is reclaim with t.mu held.
func (t *Tracker) drainLocked() uint64 {
	var got uint64
	for _, a := range t.accts {
		if a == nil {
			continue
		}
		if l := a.takeLease(); l > 0 {
			t.devRelease(l)
			got += l
		}
	}
	return got
}

// leased is the sum of all accounts' leases, for Used.
func (t *Tracker) leased() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var sum uint64
	for _, a := range t.accts {
		if a != nil {
			sum += a.lease.Load() &^ leaseClosed
		}
	}
	return sum
}
