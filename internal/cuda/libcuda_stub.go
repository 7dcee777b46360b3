//go:build !cgo || !linux

package cuda

import "fmt"

// Library is unavailable without cgo on linux: Load always reports ErrNoDriver,
// so that code built with CGO_ENABLED=0 still runs on the fake driver.
type Library struct {
	Driver
	Baseline
}

// Load reports that this build cannot reach the driver.
func Load() (*Library, error) {
	return nil, fmt.Errorf("%w: built without cgo on linux", ErrNoDriver)
}
