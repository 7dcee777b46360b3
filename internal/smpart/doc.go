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
// # Locks
//
// Their places in docs/LOCKS.md's order (a goroutine holding one takes
// only those below it):
//
//	Partition.mu (7: layouts, shape, streams, events, closed; Drained and GaveDrained only try it)
//	└── Split.mu (8: which groups partitions hold; version written under it)
//	    Device.mu (9: closed, the primary streams kept)
//	    └── greens.mu (10: the kept green contexts, per driver and device, and the map's claim)
//	slots.grow, slots.mu, waitLog.mu (leaves, outside the ranks)
package smpart
