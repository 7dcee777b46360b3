//go:build amd64 || arm64

package tokenbucket

// pause hints to the CPU that the caller is spinning (PAUSE on amd64, YIELD
// on arm64): it frees execution resources for a sibling hyper-thread and,
// on x86, avoids the memory-order mis-speculation penalty when the spin ends.
//
//go:noescape
func pause()
