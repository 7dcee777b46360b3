// Package osthread names the calling OS thread cheaply.
//
// Tenant.Do and a partition's exclusion identify the thread a caller is
// locked to by its kernel thread id. gettid is a system call on every
// call (about 100 ns on the 2-core CPU machine, more where syscalls are
// mitigated); with cgo the id is read once per thread and then kept in C
// thread-local storage, so each later call costs one cgo crossing (about
// 40 ns there; BenchmarkID beside BenchmarkGettid).
package osthread

// ID is the calling OS thread's kernel id (gettid). The caller must be
// locked to its thread (runtime.LockOSThread) for the answer to stay true
// after the call.
func ID() int { return id() }
