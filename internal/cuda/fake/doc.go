// Package fake is an in-process CUDA driver for tests and GPU-free demos. It
// implements cuda.Driver with the real driver's rules and error codes: SM
// splits follow the device description's granularity, alignment and
// co-scheduling limit and report their remainder; descriptors built from
// groups of different splits are refused; green-context streams must be
// non-blocking; launches past the device's grid, block and shared-memory
// limits (its attributes, Spec) are refused; memory runs out; handles die
// when destroyed; and any entry point can be made to fail on demand.
//
// Kernels do nothing unless the test registers a Go implementation for their
// name, which then runs on the fake device memory.
//
// # Streams
//
// Work issued on a stream (kernels, graphs, memsets, frees) runs in order,
// outside the driver's lock, as on a GPU: one tenant's long kernel holds
// its own stream, not the other tenants' calls. On an idle stream it runs
// on the caller's goroutine before the call returns, so a test may read a
// result straight after its launch; behind queued work it joins the queue
// and the call returns at once. Queries, synchronisations and events
// follow what is done (queue.go).
//
// # Stalls
//
// A stalled tenant has CPU tests: HoldStream(s) queues a kernel that never
// ends on s, HoldKernel(name) makes every launch of a kernel one, and a
// launch of spin(kernels.SpinForever) is one until ReleaseSpins. The held
// stream never completes (cuStreamQuery answers not ready, its
// synchronisations wait, events recorded after the hold never complete)
// while every other stream keeps working; the release func ends the stall,
// and the queued work then runs in order.
package fake
