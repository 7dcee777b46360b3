// Package fcsp shares one GPU between the request classes of one Go process
// with real isolation, by direct calls instead of LD_PRELOAD interception.
//
// A server opens a Pool on a device and makes one Tenant per request class:
//
//	pool, err := fcsp.Open(ctx, 0)
//	interactive, err := pool.NewTenant("interactive",
//		fcsp.WithSMs(16), fcsp.WithMemoryQuota(8<<30))
//	batch, err := pool.NewTenant("batch",
//		fcsp.WithRestOfSMs(), fcsp.WithSMLimit(0.5))
//
// Each tenant gets its own SMs (a green context cut at the granularity the
// driver reports), its own streams, a memory quota enforced by lock-free
// accounting that never lets the sum of allocations pass a limit, and a
// deterministic launch-rate limit (a device bucket and per-stream buckets
// charged from grid x block, no feedback loop). Streams carry a class: NCCL
// streams are never throttled, attention streams 20% less, copies 50% less.
//
// A tenant made with no SM option is unpartitioned: it shares the SMs no
// partition holds with the other unpartitioned tenants (the whole device
// while no partition exists), never a partition's, and those SMs follow
// the partitions as they are made, closed and reshaped. The pool confines
// the work queued on its tenants' streams and graphs; work a library queues
// on its own default stream of the primary context, behind the SDK's back,
// runs on every SM, the partitions' included. Pool.ProbeSMs runs a %smid
// kernel on each tenant to check where work lands (docs/CONTEXTS.md).
//
// Library code (cuBLAS, cuDNN, a cgo backend) runs through Tenant.Do with
// one of the tenant's green contexts current; a tenant keeps one per Do in
// flight, all over its SMs. Nothing else takes a green context: the calls a
// server makes between requests (Alloc and Free, from a stream-ordered pool
// per tenant that never waits for the device; streams; memory figures;
// Stats) use the device's primary context, so they never queue a class's
// requests behind each other (docs/CONTEXTS.md).
//
// SMs are split; memory bandwidth is not: every partition's kernels share
// the device's memory. Stats.Bandwidth shows what a metered tenant gets
// (achieved bytes/s, slowdown), and WithPriority(LatencyCritical) with
// WithBandwidthFloor on its neighbours holds them to a fraction of their
// GPU share while the latency tenant has kernels in flight.
//
// The handles a tenant hands out (Context, Stream.Handle) are the driver's
// own CUcontext and CUstream, usable from any other binding. Every error is
// typed: sentinels for errors.Is, and *CUDAError values carrying the CUDA
// result code for driver failures. A call on a tenant (or on its streams,
// modules, graphs) fails with a *TenantError, as a file's call with an
// *os.PathError: `tenant "batch": Alloc: ` and the cause, each named once.
//
// Without a GPU, tests and demos open a simulated one (package fcsptest):
//
//	pool, err := fcsp.Open(ctx, 0, fcsptest.SimulatedH200())
//
// and package kernels holds a first kernel to load and launch.
//
// Tenants of one process share fate: a sticky device error (a kernel's
// illegal address, say) poisons every context of the device in the
// process. The pool then answers every tenant with ErrDeviceLost, and
// Health says RestartRequired: the driver keeps the fault until the process
// exits (on the H200 even through a reset of the primary context), so the
// way back is a new process. Classes that must survive each other's faults
// belong in separate processes sharing one limit (WithSharedRegion): on
// the H200 a faulted process's replacement served again 1.2 s after the
// fault (most of it the new process's Open), and the other process's P99
// meanwhile was 1.20-1.27x its quiet P99 (examples/faultdomain).
//
// # Locks
//
// fcsp's places in docs/LOCKS.md's order, with the engines' beside them:
//
//	tenantCore.closing (1: the close under way)
//	└── smmove Engine.move (2: one move of SMs at a time; the one lock a move may hold while it waits for calls)
//	    └── smprobe Kernel.mu (3)
//	        └── tenancy Roster.mu (4: the pool's lock: tenants, spare, closed; no driver call)
//	            └── smmove Engine.mu (5)
//	                └── tenantCore.mu (6: streams, modules, gone, graphs, stop, onClose; no driver call)
//	                    └── smpart, devmem, memtrack, admission (7-20)
//
// A tenant's life lock (internal/life) is hand-built and sits beside them:
// the move protocol in docs/LOCKS.md says which waits of a move it allows.
package fcsp
