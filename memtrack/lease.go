package memtrack

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
//     the device and tries again: a refusal means the device counter was
//     full after the leases were returned, i.e. full of allocations (plus
//     bytes freed after the sweep, which were allocations a moment before).
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
// device usage (allocations) it observed.
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
	have := a.takeLease() // what is left of the lease counts towards n
	if have >= n {        // a release refilled it since the fast path looked
		if have > n {
			a.putLease(have - n)
		}
		return 0, true, nil
	}
	need := n - have
	// Take a chunk along only while every open account could hold one.
	if spare := t.limit - min(t.limit, t.dev.Load()); spare >= need && (spare-need)/uint64(t.n.Load()+1) >= t.chunk {
		t.grabbing.Add(1)                        // a chunk in hand, in no lease yet: see below
		_, ok, _ := t.devReserve(need + t.chunk) // no error: leases are off with a shared region
		if ok {
			a.putLease(t.chunk)
		}
		t.grabbing.Add(-1)
		if ok {
			return 0, true, nil
		}
	}
	// The device counter is full: take every lease back and retry. Refuse
	// once a sweep found no lease and no chunk on its way into one, and a
	// retry after it still failed (or after a few sweeps, should other
	// tenants keep re-leasing what was swept).
	for sweep := 0; sweep < 8; sweep++ {
		if _, ok, _ := t.devReserve(need); ok {
			return 0, true, nil
		}
		if t.reclaim() == 0 && t.grabbing.Load() == 0 {
			if _, ok, _ := t.devReserve(need); ok {
				return 0, true, nil
			}
			break
		}
	}
	if have > 0 {
		t.devRelease(have)
	}
	return t.Used(), false, nil
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
