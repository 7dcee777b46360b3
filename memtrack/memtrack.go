package memtrack

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/internal/spin"
)

// cacheLine is the padding unit that keeps hot counters of different
// tenants (and the device total) on different cache lines, so that tenants
// allocating on different cores do not invalidate each other's lines.
const cacheLine = 64

type pad [cacheLine]byte

// closedBit is set in an account's used word by Close. Folding the flag into
// the counter makes every compare-and-swap on the counter also a check that
// the account is open, so a reservation and its cancellation cannot slip past Close.
const closedBit = uint64(1) << 63

// Allocation is a live allocation of an account.
type Allocation struct {
	Ptr  uint64 // device pointer
	Size uint64 // bytes
}

// Option configures a Tracker.
type Option func(*Tracker) error

// Tracker is the memory accounting of one device. It is safe for
// concurrent use.
type Tracker struct {
	_     pad
	local uint64 // atomic; device total when not shared; accessed through dev
	_     pad

	limit uint64       // set once before sharing; device limit; immutable
	dev   shm.Counter  // set once before sharing; device total when not shared: &local
	share SharedDevice // set once before sharing; WithShared's node-wide total; nil otherwise

	records  recordMap // atomic; the live allocations (a lock-free map)
	spans    spanMap   // atomic; the records by where they lie (Block)
	chunk    uint64    // set once before sharing; lease chunk (lease.go); 0: no leases
	chunkSet bool      // set once before sharing; WithLeaseChunk given

	mu     lockorder.Mutex[lockorder.Tracker] // guards ids and registry changes; never on the hot path
	free   []uint16                           // guarded by mu; recycled account ids
	accts  []*Account                         // guarded by mu; open accounts by id, for reclaim (lease.go)
	nextID uint16                             // guarded by mu
	n      atomic.Int64                       // atomic; number of open accounts (changed under mu)
	closed atomic.Bool                        // atomic; set by Close, under mu
	// atomic; refills running, which may hold lease bytes or a chunk in no
	// lease (lease.go); written only when a lease runs short, off the hot
	// path
	grabbing atomic.Int64
	// atomic; draining is set while Tracker.exact drains the leases
	// (under mu): refills take no chunk meanwhile (lease.go)
	draining atomic.Bool
}

// New returns a Tracker for a device whose allocations must never total
// more than deviceLimit bytes.
func New(deviceLimit uint64, opts ...Option) (*Tracker, error) {
	if deviceLimit == 0 {
		return nil, fmt.Errorf("%w: device limit is 0 bytes; it must be at least 1 byte", ErrInvalidLimit)
	}
	t := &Tracker{limit: deviceLimit, nextID: 1}
	t.dev = shm.CounterOf(&t.local)
	for _, o := range opts {
		if err := o(t); err != nil {
			return nil, err
		}
	}
	if !t.chunkSet {
		t.chunk = leaseChunkFor(deviceLimit)
	} else if t.chunk > deviceLimit {
		return nil, fmt.Errorf("%w: lease chunk of %d bytes is larger than the %d-byte device limit; use at most the limit, or 0 for no leases", ErrInvalidLimit, t.chunk, deviceLimit)
	}
	if t.share != nil {
		t.chunk = 0 // see lease.go
	}
	return t, nil
}

// Used returns the bytes currently reserved on the device. With WithShared
// this is the node-wide total of all processes sharing the region, which
// may transiently include reservations that are being rolled back.
//
// After Close it is 0: the tracker no longer looks at the device (nor at
// WithShared's region, which its owner may unmap).
func (t *Tracker) Used() uint64 {
	if t.closed.Load() {
		return 0
	}
	if t.share != nil {
		return t.share.Used()
	}
	if t.chunk != 0 {
		return sat(t.dev.Load(), t.leased()) // leases are headroom, not use
	}
	return t.dev.Load()
}

// Limit returns the device limit in bytes.
func (t *Tracker) Limit() uint64 { return t.limit }

// Room is how many of want bytes the device limit has left: want, or
// Limit less Used where that is less. (The device counter alone, which
// counts the accounts' leases too, settles it where it leaves want; Used,
// which walks the accounts for their leases, only where it does not.)
func (t *Tracker) Room(want uint64) uint64 {
	if t.closed.Load() {
		return 0
	}
	if t.share == nil && sat(t.limit, t.dev.Load()) >= want {
		return want
	}
	return min(want, sat(t.limit, t.Used()))
}

// Accounts returns the number of open accounts (0 after Close).
func (t *Tracker) Accounts() int {
	if t.closed.Load() {
		return 0
	}
	return int(t.n.Load())
}

// Close closes every open account (see Account.Close) and refuses new ones
// and device reservations with ErrClosed; it returns the bytes the accounts
// still held. After Close the tracker's reads report a closed, empty device
// (Used and Accounts 0, Reaped false) and it never again touches
// WithShared's device, so that its owner may release it. A second Close
// returns ErrClosed.
func (t *Tracker) Close() (leaked uint64, err error) {
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		return 0, ErrClosed
	}
	t.closed.Store(true)
	open := make([]*Account, 0, len(t.accts))
	for _, a := range t.accts {
		if a != nil {
			open = append(open, a)
		}
	}
	t.mu.Unlock()
	for _, a := range open {
		n, _ := a.Close() // ErrClosed: its owner closed it first
		leaked += n
	}
	return leaked, nil
}

// NewAccount opens an account for a tenant. limit may exceed the device
// limit, in which case the device limit is the effective bound.
func (t *Tracker) NewAccount(name string, limit uint64) (*Account, error) {
	if limit == 0 {
		return nil, fmt.Errorf("%w: tenant %q limit is 0 bytes; it must be at least 1 byte", ErrInvalidLimit, name)
	}
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: tenant %q: the device's tracker is closed", ErrClosed, name)
	}
	var id uint16
	switch {
	case len(t.free) > 0:
		id = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	case t.nextID != 0 && uint32(t.nextID) <= maxAccounts:
		id = t.nextID
		t.nextID++ // wraps to 0 after 65535, which stops allocation above
	default:
		t.mu.Unlock()
		return nil, fmt.Errorf("%w: tenant %q: at most %d are allowed per device", ErrTooManyAccounts, name, maxAccounts)
	}
	a := &Account{t: t, name: name, id: id}
	a.limit.Store(limit)
	for int(id) >= len(t.accts) {
		t.accts = append(t.accts, nil)
	}
	t.accts[id] = a
	t.n.Add(1)
	t.mu.Unlock()
	return a, nil
}

// retire gives a's lease back to the device and its id to new accounts.
func (t *Tracker) retire(a *Account) {
	t.mu.Lock()
	a.closeLease()
	t.accts[a.id] = nil
	t.free = append(t.free, a.id)
	t.n.Add(-1)
	t.mu.Unlock()
}

// devReserve admits n bytes against the device limit. On failure it
// returns the device usage it observed.
func (t *Tracker) devReserve(n uint64) (used uint64, ok bool, err error) {
	if t.share != nil {
		return t.sharedReserve(n)
	}
	for {
		u := t.dev.Load()
		if n > t.limit || u > t.limit-n {
			return u, false, nil
		}
		if t.dev.CompareAndSwap(u, u+n) {
			return 0, true, nil
		}
	}
}

// sharedReserve admits n bytes against the node-wide total, the sum of all
// processes' slot usage. The process's own slot word is the only shared
// state it writes (see internal/shm for why), so admission is optimistic:
// add to the slot, re-read the sum, roll back on overshoot. Of two racing
// reservations the one whose sum is read later sees the other's add
// (sync/atomic is sequentially consistent), so the sum of admitted
// reservations never passes the limit; the price is that racing
// reservations near the limit may both be rejected.
//
// A process that was reaped (see WithShared) gets ErrReaped: its slot
// refuses the write.
func (t *Tracker) sharedReserve(n uint64) (used uint64, ok bool, err error) {
	if n > t.limit {
		return t.Used(), false, nil
	}
	if err := t.share.Add(n); err != nil {
		return 0, false, err
	}
	if u := t.share.Used(); u > t.limit {
		_ = t.share.Sub(n)
		return u - min(n, u), false, nil
	}
	return 0, true, nil
}

// devRelease gives n bytes back to the device. In a slot that was reaped
// the write is refused: the reaper already gave back everything the slot
// held, so there is nothing left to give.
func (t *Tracker) devRelease(n uint64) {
	if t.share != nil {
		_ = t.share.Sub(n)
		return
	}
	t.dev.Sub(n)
}

// Reaped reports whether the tracker's shared slot was taken over by a
// reaper (always false without WithShared); Reserve then fails with
// ErrReaped.
func (t *Tracker) Reaped() bool {
	return t.share != nil && !t.closed.Load() && errors.Is(t.share.Add(0), ErrReaped)
}

// Account is one tenant's share of a device. It is safe for concurrent use.
// Its methods' errors do not name it: the caller knows which account it
// called, and names it once where it says so (fcsp's TenantError), as the
// os package names the file and the system call's error does not.
type Account struct {
	t    *Tracker
	name string
	id   uint16
	// apart: the device limit is charged by the account's owner
	// (ChargeDeviceApart), not by its reservations. Set before the first.
	apart bool
	// The counters are a cache line from any other object's bytes: the
	// fields above are the account's own, set once, and with this pad 64
	// bytes (one pad fewer than the counters had before them: accounts
	// are made and closed with tenants, 150,000 a second in a server's
	// storm, and each byte is garbage).
	_     [cacheLine - 32]byte
	used  atomic.Uint64 // bytes reserved, | closedBit once closed
	limit atomic.Uint64
	lease atomic.Uint64 // device headroom held, | leaseClosed (lease.go)
	// ops counts Records and Releases between their closed check and
	// their last use of the account's id: Close waits for them before the
	// id can go to a new account, whose records they would otherwise
	// remove (same line as used: the same calls write both).
	ops atomic.Int32
	_   pad
}

// Name returns the tenant name given to NewAccount.
func (a *Account) Name() string { return a.name }

// Used returns the bytes currently reserved by the account.
func (a *Account) Used() uint64 { return a.used.Load() &^ closedBit }

// Limit returns the account's limit in bytes.
func (a *Account) Limit() uint64 { return a.limit.Load() }

// SetLimit changes the account's limit. Lowering it below the current usage
// is allowed: existing allocations stay, new reservations fail until usage
// drops below the new limit.
func (a *Account) SetLimit(limit uint64) error {
	if limit == 0 {
		return fmt.Errorf("%w: a limit of 0 bytes; it must be at least 1 byte", ErrInvalidLimit)
	}
	if a.used.Load()&closedBit != 0 {
		return ErrClosed
	}
	a.limit.Store(limit)
	return nil
}

// reserve admits an allocation of n bytes against the tenant and the device
// limits (see Reserve). On failure nothing changes and the error is a
// *QuotaError (errors.Is ErrQuotaExceeded), ErrInvalidSize or ErrClosed.
//
// Each limit is enforced with a compare-and-swap loop, so neither counter
// ever exceeds its limit, not even transiently. A relaxed load of the
// tenant total first rejects requests that cannot fit without writing any
// shared cache line. Then the device total is reserved, then the tenant
// total; a tenant rejection (a racing reservation of the same tenant took
// the room) rolls the device back. Reserving the device first means the
// device total always covers the tenant totals, which is what lets Close
// give back a tenant's bytes without ever undercounting the device. The
// price is that a tenant's losing race can make the device total
// over-count for a few nanoseconds: conservative, never a passed limit.
func (a *Account) reserve(n uint64) error {
	if n == 0 || n > maxRecordSize {
		return a.sizeErr(n)
	}
	lim := a.limit.Load()
	u := a.used.Load()
	if u&closedBit != 0 {
		return ErrClosed
	}
	if n > lim || u > lim-n {
		return &QuotaError{Tenant: a.name, Requested: n, Used: u, Limit: lim, Scope: ScopeTenant}
	}
	if a.apart {
		return a.reserveApart(n)
	}
	if du, ok, err := a.devTake(n); err != nil {
		return err
	} else if !ok {
		return &QuotaError{Tenant: a.name, Requested: n, Used: du, Limit: a.t.limit, Scope: ScopeDevice}
	}
	for {
		if u&closedBit != 0 {
			a.devGive(n)
			return ErrClosed
		}
		if n > lim || u > lim-n {
			a.devGive(n)
			return &QuotaError{Tenant: a.name, Requested: n, Used: u, Limit: lim, Scope: ScopeTenant}
		}
		if a.used.CompareAndSwap(u, u+n) {
			return nil
		}
		u = a.used.Load()
	}
}

// reserveApart is reserve's tenant half alone, for an account whose owner
// charges the device.
func (a *Account) reserveApart(n uint64) error {
	lim := a.limit.Load()
	for {
		u := a.used.Load()
		if u&closedBit != 0 {
			return ErrClosed
		}
		if n > lim || u > lim-n {
			return &QuotaError{Tenant: a.name, Requested: n, Used: u, Limit: lim, Scope: ScopeTenant}
		}
		if a.used.CompareAndSwap(u, u+n) {
			return nil
		}
	}
}

// ChargeDeviceApart makes the account's reservations count against its own
// limit alone: its owner charges the device limit itself, through
// Tracker.ReserveDevice, for the device memory its allocations take. A
// pooled tenant's memory engine does so: its pool maps device memory in
// chunks (32 MiB on the H200) that hold its allocations, cached blocks and
// free space, and the device limit counts the chunks, not the bytes asked
// for. Call it before the account's first reservation; an account that
// holds bytes (or is closed) refuses with ErrInvalidArgument (ErrClosed).
func (a *Account) ChargeDeviceApart() error {
	u := a.used.Load()
	if u&closedBit != 0 {
		return ErrClosed
	}
	if u != 0 {
		return fmt.Errorf("%w: the account holds %d bytes; its device charge can change only while it holds none", ErrInvalidArgument, u)
	}
	a.apart = true
	return nil
}

// devBack gives n bytes the account no longer holds back to the device,
// unless its owner charges the device.
func (a *Account) devBack(n uint64) {
	if n > 0 && !a.apart {
		a.devGive(n)
	}
}

func (a *Account) sizeErr(n uint64) error {
	if n == 0 {
		return fmt.Errorf("%w: requested 0 bytes; sizes must be at least 1 byte", ErrInvalidSize)
	}
	return fmt.Errorf("%w: requested %d bytes; sizes must be at most %d bytes", ErrInvalidSize, n, uint64(maxRecordSize))
}

// sub removes n bytes from the account unless it has been closed, in which
// case Close already gave them back to the device. It returns how many bytes
// the caller must give back to the device.
func (a *Account) sub(n uint64) uint64 {
	for {
		u := a.used.Load()
		if u&closedBit != 0 {
			return 0
		}
		m := min(n, u) // an unbalanced Unreserve is a caller bug; never underflow
		if a.used.CompareAndSwap(u, u-m) {
			return m
		}
	}
}

// unreserve gives back n bytes of a successful reserve that did not become
// an allocation. Giving back more than is reserved clamps at zero.
func (a *Account) unreserve(n uint64) {
	if n == 0 {
		return
	}
	a.devBack(a.sub(n))
}

// record remembers a live allocation of n bytes at device pointer ptr, so
// that Release(ptr) can attribute the free. The n bytes must have been
// reserved; record itself changes no counter.
func (a *Account) record(ptr uint64, n uint64) error {
	if n == 0 || n > maxRecordSize {
		return a.sizeErr(n)
	}
	a.ops.Add(1)
	defer a.ops.Add(-1)
	if a.used.Load()&closedBit != 0 {
		return ErrClosed
	}
	if !a.t.addRecord(ptr, packWord(n, a.id)) {
		return fmt.Errorf("pointer %#x is already recorded as a live allocation; free it before recording it again", ptr)
	}
	if a.used.Load()&closedBit != 0 {
		// Close ran while we inserted and may have missed the record;
		// take it back so no record outlives its account.
		a.t.dropRecord(ptr, a.id)
		return ErrClosed
	}
	return nil
}

// Release forgets the allocation at ptr and gives its bytes back to the
// tenant and the device. It returns the allocation size. A pointer that is
// not a live allocation of this account (never recorded, already released,
// or another tenant's) yields ErrUnknownPointer and changes nothing.
func (a *Account) Release(ptr uint64) (uint64, error) {
	a.ops.Add(1)
	w, ok := uint64(0), false
	closed := a.used.Load()&closedBit != 0
	if !closed {
		w, ok = a.t.dropRecord(ptr, a.id)
	}
	a.ops.Add(-1)
	// A Close between the look and the removal may have taken the record:
	// the pointer was live, and Close gave its bytes back.
	if closed || !ok && a.used.Load()&closedBit != 0 {
		return 0, ErrClosed
	}
	if !ok {
		return 0, fmt.Errorf("%w: no live allocation of the account at %#x", ErrUnknownPointer, ptr)
	}
	n := wordSize(w)
	a.devBack(a.sub(n))
	return n, nil
}

// MemInfo returns what cuMemGetInfo should report to this tenant given the
// device's real free and total bytes: total is min(limit, deviceTotal) and
// free is min(total-used, deviceFree), never negative.
func (a *Account) MemInfo(deviceFree, deviceTotal uint64) (free, total uint64) {
	total = min(a.Limit(), deviceTotal)
	free = min(sat(total, a.Used()), deviceFree)
	return free, total
}

// Live returns a snapshot of the account's live allocations, in no
// particular order, for leak reports. It is O(4096 + live records).
func (a *Account) Live() []Allocation {
	if a.used.Load()&^closedBit == 0 {
		// Every record holds its bytes in used: none to find, and no walk
		// of the tracker's records (a server makes and closes tenants).
		return nil
	}
	return a.t.records.snapshot(a.id, nil)
}

// Close forgets all of the account's live records and gives all its
// reserved bytes back to the device; the caller is responsible for freeing
// the device memory itself. It returns the bytes that were still reserved
// (recorded allocations plus reservations never recorded). Operations after
// Close return ErrClosed, and so does a second Close.
//
// Close may race with any other method: every byte is given back to the
// device exactly once, and a Commit or Release that loses the race reports
// ErrClosed (its bytes are then part of leaked).
func (a *Account) Close() (leaked uint64, err error) {
	for {
		u := a.used.Load()
		if u&closedBit != 0 {
			return 0, ErrClosed
		}
		if a.used.CompareAndSwap(u, u|closedBit) {
			break
		}
	}
	// Records hold their bytes in used, and after closedBit none is added:
	// an account that held nothing has no record to forget.
	if a.used.Load()&^closedBit != 0 {
		a.t.dropOwner(a.id)
	}
	// From here no operation changes a.used (they all see closedBit), so
	// whatever is left is ours to return to the device exactly once.
	leaked = a.used.Swap(closedBit) &^ closedBit
	if leaked > 0 && !a.apart {
		a.t.devRelease(leaked)
	}
	// A Record or Release that passed its closed check before closedBit
	// may still be using the id; wait them out (they are short and never
	// block) before a new account may get it.
	spin.Until(func() bool { return a.ops.Load() == 0 }, time.Microsecond)
	a.t.retire(a)
	return leaked, nil
}

// ReserveDevice counts n bytes against the device limit alone, for device
// memory the caller holds outside every account: the freed blocks a pool
// keeps for reuse, which the driver still holds. It fails, changing
// nothing, with a *QuotaError of ScopeDevice (Tenant empty), ErrReaped or
// ErrInvalidSize. ReleaseDevice gives the bytes back.
func (t *Tracker) ReserveDevice(n uint64) error {
	if n == 0 || n > maxRecordSize {
		return fmt.Errorf("%w: device reservation of %d bytes; sizes must be 1 to %d bytes", ErrInvalidSize, n, uint64(maxRecordSize))
	}
	if t.closed.Load() {
		return ErrClosed
	}
	du, ok, err := t.devReserve(n)
	if !ok && err == nil && t.chunk != 0 {
		// The device counter holds the accounts' leases too, which are
		// headroom, not use: settle the request with them drained.
		du, ok, err = t.exact(n)
	}
	if err != nil {
		return fmt.Errorf("%w", err)
	}
	if !ok {
		return &QuotaError{Requested: n, Used: du, Limit: t.limit, Scope: ScopeDevice}
	}
	return nil
}

// ReleaseDevice gives back n bytes of ReserveDevice.
func (t *Tracker) ReleaseDevice(n uint64) {
	if n > 0 && !t.closed.Load() {
		t.devRelease(n)
	}
}

// ChargeDevice counts n bytes against the device limit whether or not it
// has room for them: device memory already taken outside the tracker's
// view (fcsp's unaccounted figure, folded into the limit's headroom),
// which no refusal could give back. Used may then pass Limit; every
// reservation is refused until it falls back below, the headroom the
// accounts had leased included (it is taken back). ReleaseDevice gives
// the bytes back. ErrClosed after Close; with WithShared, ErrReaped once
// the slot was reaped.
func (t *Tracker) ChargeDevice(n uint64) error {
	if t.closed.Load() {
		return ErrClosed
	}
	if t.share != nil {
		return t.share.Add(n)
	}
	if t.dev.Add(n) > t.limit && t.chunk != 0 {
		t.reclaim() // a lease is room the limit no longer has
	}
	return nil
}
