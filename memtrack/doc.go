// Package memtrack is the per-device GPU memory quota of fcsp-go.
//
// A [Tracker] holds the running total of one device and a [Account] holds
// the running total of one tenant (request class) on that device. Every
// allocation is admitted by [Account.Reserve] before the driver is asked for
// memory; the [Reservation] it returns is committed to the device pointer
// the driver returned, or cancelled if the driver failed. A free is
// [Account.Release], or [Account.StartRelease] when the driver may refuse
// it: the [PendingRelease] is committed once the driver freed the memory,
// or cancelled, which keeps the allocation tracked.
//
// # Why not do it the HAMi-core way
//
// HAMi-core, the LD_PRELOAD library this package replaces for Go processes,
// guards its shared accounting region with a single process-shared
// semaphore, and on every allocation scans all process slots (O(N) in the
// number of processes/tenants) to compute current usage. Under an allocation
// storm every allocating thread serialises on that semaphore and each holder
// pays the scan, which is where HAMi-core's reported ~94 ms P99 allocation
// latency comes from.
//
// memtrack instead keeps one running total per tenant and one per device in
// cache-line padded atomics. Admission is a compare-and-swap loop on the
// tenant total followed by one on the device total, so its cost does not
// depend on how many accounts exist, and no lock is held across anything.
// The invariant it maintains is:
//
//	at every instant, the sum of successful, not yet released reservations
//	is <= the device limit, and each tenant's sum is <= its limit.
//
// Because admission uses compare-and-swap rather than add-then-roll-back,
// the counters themselves never exceed their limits either, so [Tracker.Used]
// and [Account.Used] are always valid upper bounds that can be reported to
// the application (see [Account.MemInfo]) and concurrent near-limit
// reservations never reject each other spuriously.
//
// The device total is not written by every allocation: each account leases
// device headroom in chunks and charges its allocations against its lease
// (a lease), so tenants allocating on different cores do not share a
// cache line. Leases count in the device total, which keeps the invariant
// above; a reservation that finds the device full takes every lease back
// before it refuses, so leases never cause a refusal.
//
// Live allocations are kept in a lock-free hash map keyed on the device
// pointer (4096 buckets, FNV-1a), with size and owning account packed into a
// single 64-bit word so that a free is one compare-and-swap that both checks
// ownership and removes the record. A free of an unknown pointer, a double
// free, or a free of another tenant's pointer is rejected with
// [ErrUnknownPointer] and changes no counter. A second lock-free map keeps
// the same records by where they lie (each under its size's power of two
// and the window of its base), so that [Tracker.Block] finds the
// allocation holding any pointer, at its start in one probe and inside it
// in three a size class in use: what a copy is checked against before the
// driver sees it. It costs an allocation and a free one more insert and
// removal.
//
// With [WithShared] the device total is node-wide: a [SharedDevice] sums
// every process's usage (fcsp's is one word per process in a /dev/shm
// region), so that several processes on one GPU enforce one device limit,
// and a crashed process's usage is reclaimed exactly by clearing its word.
// Shared admission adds to the process's own usage, re-reads the sum and
// rolls back on overshoot; that costs one SharedDevice.Used (with fcsp's
// region, one load per process, not per tenant).
//
// # Lock order
//
// This package's slice of docs/LOCKS.md, each lock's level there in
// parentheses (a lock is taken only under those above it):
//
//	devmem charge.mu (13)           a pool's charge against the device limit (ReserveDevice, ReleaseDevice)
//	  memtrack Tracker.mu (15)      account ids and the open accounts' registry; the leases' drain and sum (exact, reclaim, leased)
//
// Tracker.mu is a leaf: nothing is taken under it (fcsp's shared device
// answers Add, Sub and Used from the region's words, with no lock), and it
// is never on the hot path:
// the quota and the device counter are atomics, taken with
// compare-and-swap. It is taken under whatever its callers hold: an
// allocation's reservation, devmem's charge, the SDK's own objects'
// charges (internal/overhead, through the pool's guard: under
// smprobe's Kernel.mu or smpart's Partition.mu, say) and memwatch's sample.
package memtrack
