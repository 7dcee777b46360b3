//go:build !amd64 && !arm64

package tokenbucket

// pause is a no-op where there is no spin hint stub; the spin loop is still
// bounded by the clock, so only power efficiency is lost.
func pause() {}
