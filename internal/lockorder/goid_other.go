//go:build !amd64 && !arm64

package lockorder

// goid names the calling goroutine: its id (stackID), which costs a
// traceback of the whole stack.
func goid() uintptr { return stackID() }
