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
// Driver is the interface the rest of the SDK programs against; Baseline
// holds what only tests, benchmarks and examples call. Load returns the real
// library, and package fake provides an in-process device with the same
// rules and error codes for tests; both implement both interfaces.
//
// # The binding is generated
//
// Every entry point is one row of the table in gen/table.go; `go generate
// ./internal/cuda` (or `go run ./internal/cuda/gen` from the module root)
// writes shim.h, shim_entries.h, zz_generated_shim.c,
// zz_generated_libcuda.go (the Go wrappers on Library),
// zz_generated_driver.go (Driver and Baseline), zz_generated_guard.go
// (Guard: every Driver method through a Watcher, so that a sticky error from
// any call is seen; rows marked Release pass while lost) and
// fake/zz_generated.go.
// Hand-written are shim_types.h (the C types), shim_internal.h (the GUARD and
// SCOPED macros), shim.c (dlopen and the wrappers whose bodies are more than
// push, call, pop) and libcuda.go (Load, and the Go methods that copy
// buffers, strings or resources), and ctxswap.h/.c/.go (CtxSwapCurrent, a
// composite of two entry points in one cgo call: its table row has no
// symbol). CI regenerates and fails on any difference.
//
// To add an entry point:
//
//  1. Add a row to gen/table.go: Sym, Names (versioned names first), the
//     driver's named C Params, Ctx (free, pushed, or pushedOrNone where a
//     zero context means "push none"), Required if Load must fail without
//     it, the Go Method as it reads in the interface, and Iface (Driver if
//     production code calls it, else Baseline). Name the C parameters like
//     the Go ones they come from; a pointer parameter named like none is an
//     output, the method's next result. A context-dependent method takes its
//     Context first, under any name. A parameter the Go side never sets is
//     written with its value ("unsigned flags=0"). Handles (the uintptr types
//     of types.go) convert through handle() by themselves; a new handle type
//     needs its uintptr type in types.go and its C typedef in shim_types.h.
//  2. Where the Go side is more than conversions (slices, strings, the
//     144-byte CUdevResource), set CustomGo and write the method in
//     libcuda.go; where the C side is more than push, call, pop, set CustomC
//     to the shim's parameters and write the body in shim.c.
//  3. Run go generate ./internal/cuda, implement the method on fake.Driver
//     (the build says so until it is there), and test it on the fake.
package cuda

//go:generate go run ./gen
