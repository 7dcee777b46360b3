// Package cuda is a small typed binding of the CUDA driver API, loaded from
// libcuda.so.1 at run time so that the module builds and tests on machines
// with no CUDA toolkit and no GPU.
//
// Two rules shape it. First, a CUDA context is current per OS thread and
// goroutines move between threads, so every call that depends on a context
// takes that context as an argument and the C shim pushes it, calls, and pops
// it inside one cgo call: no goroutine ever relies on what happens to be
// current on its thread, and no thread is left with a green context current
// (the driver allows a green context to be current on one thread at a time).
// Second, versioned entry points (cuMemAlloc_v2, cuCtxCreate_v4, ...) are
// resolved by name, since plain dlsym("cuMemAlloc") returns the legacy ABI.
//
// Driver is the interface the rest of the SDK programs against; Load returns
// the real one, and package fake provides an in-process device with the same
// rules and error codes for tests.
package cuda
