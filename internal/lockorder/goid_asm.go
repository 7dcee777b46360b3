//go:build amd64 || arm64

package lockorder

// getg is the calling goroutine's runtime g, read from the register or
// thread-local slot the runtime keeps it in (goid_*.s).
func getg() uintptr

// goid names the calling goroutine while it lives: its g, which the
// runtime hands to a new goroutine only after this one has exited.
// (runtime.Stack's header says the same, with a traceback of the whole
// stack: 85% of a checked test run's time.)
func goid() uintptr { return getg() }
