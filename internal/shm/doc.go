// Package shm is the node-wide shared memory region through which several
// processes that embed fcsp-go on one GPU share device totals and quotas.
//
// The region is a file (normally under /dev/shm) mapped with mmap. All
// shared state is 64-bit words updated with sync/atomic through the typed
// [Counter] API, so unsafe pointer arithmetic stays inside this package.
// Every field sits on its own 64-byte line so that processes updating
// different words do not false-share.
//
// Layout (sections 4 KiB aligned, fields on their own 64-byte lines):
//
//	page 0     header: magic, version, size, device and slot counts, the
//	           offsets of the sections below (see header* constants)
//	heartbeats one line per slot: CLOCK_MONOTONIC nanoseconds of the last
//	           beat; kept apart from the slots so that heartbeat stores
//	           never invalidate the lines the allocation path reads
//	slots      per slot: one line with the state word (state, generation)
//	           and the owner's identity (PID namespace, start time, PID,
//	           token), then one line per device with that process's bytes
//	           in use; every word but the state word and the token carries
//	           its membership's generation tag
//
// A process joins by claiming a free slot ([Region.Join]) and accounts its
// usage of each device in that slot. The node-wide total of a device
// ([Region.DeviceUsed]) is the sum of the slots' usage words.
//
// Why a sum and not a separate total counter: a total counter plus a
// per-slot counter are two words that a process must update one after the
// other, and a SIGKILL between the two updates leaves the total off by that
// allocation forever (the reaper cannot tell whether the second update
// happened). A crash test killing a process mid-storm hit that window in
// about 1 run of 12 with the two-counter design. With the slot word as the
// only shared state a process writes, every crash leaves consistent
// accounting, and reaping a dead process is zeroing its slot. The cost is
// that the total is O(slots) loads; slots are processes, never tenants, and
// the loads hit lines that change only when their owner allocates.
//
// The region is never trusted: opening checks magic, version, size and
// that the recorded layout is the one this package would compute, and
// fails with [ErrBadRegion] otherwise. A file truncated while mapped turns
// accesses past its new end into faults (SIGBUS): every call inside the
// mapping recovers one, and the region is then lost ([Region.Lost]), its
// writes failing with ErrBadRegion, rather than the process killed.
package shm
