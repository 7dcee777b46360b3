// Package smpart cuts a GPU's streaming multiprocessors into disjoint
// partitions with CUDA green contexts: the mechanism under the public
// package greenctx and under fcsp's partitioned tenants. (It was
// internal/greenctx; the name said the same as the public package's, and a
// reader had to tell the two apart by path.)
//
// The driver, not a table keyed on compute capability, decides how finely a
// device can be cut: Device asks it (cuDeviceGetDevResource, then a
// simulated cuDevSmResourceSplitByCount with no result array) and reports
// the granularity, the groups a request would produce and the SMs left over,
// before anything is built. A Split then performs one cut, and Take hands out
// partitions made of whole groups of that one cut, so partitions never share
// an SM: the driver would happily build overlapping green contexts from two
// separate splits. Each Partition owns a green context and a non-blocking
// stream, and reads back how many SMs it really got.
//
// # Lock order
//
// This package's slice of docs/LOCKS.md, each lock's level there in
// parentheses (a lock is taken only under those above it):
//
//	smmove Engine.move (2)            a move: a partition taken (NewTenant), Claim, Reshape, Unclaim; the commons' Follow
//	  tenancy Roster.mu (4)           NewTenant's admit: the split's free SMs, the spares (Spares is guarded by it)
//	    smpart Split.mu (8)
//	  smpart Partition.mu (7)         layouts, shape, the streams' and events' lists, closed, idle, prev, gave; orders Reshape, Claim, Follow and Close
//	    smpart Split.mu (8)           which groups and remainder partitions hold (used, rest, ...); version written under it
//	    smpart greens.mu (10)         a kept green context taken (a layout built) or kept (a layout let go)
//	    memtrack Tracker.mu (15)      at most: the charge of a green context, stream or event made (the pool's guard, internal/overhead)
//	smpart Device.mu (9)              closed; the device's close (cuDevicePrimaryCtxRelease under it)
//	  smpart greens.mu (10)           the process's kept green contexts, the Devices open on each, the SM map's claim
//	smpart slots.grow                 outside the ranks: making a slot (cuGreenCtxCreate)
//	  smpart greens.mu (10)
//	smpart slots.mu, waitLog.mu       outside the ranks: leaves
//
// Partition.mu is held across the driver calls that make and destroy
// layouts, streams and events, never while a context is current
// (slots.go), and across a wait for the device only in Reset and Close,
// on the streams of a tenant that has closed; Drained and GaveDrained only
// try it, so that a growth's bounded wait never waits on a Close. Split.mu
// and greens.mu make no driver call: greens' callers create and destroy
// green contexts outside it.
package smpart
