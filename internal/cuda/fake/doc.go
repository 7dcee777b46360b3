// Package fake is an in-process CUDA driver for tests and GPU-free demos. It
// implements cuda.Driver with the real driver's rules and error codes: SM
// splits follow the device description's granularity, alignment and
// co-scheduling limit and report their remainder; descriptors built from
// groups of different splits are refused; green-context streams must be
// non-blocking; memory runs out; handles die when destroyed; and any entry
// point can be made to fail on demand.
//
// Kernels do nothing unless the test registers a Go implementation for their
// name, which then runs at launch on the fake device memory.
package fake
