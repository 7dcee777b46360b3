//go:build !cgo || !linux

package nvml

import "errors"

// Query reports that NVML is unavailable: loading libnvidia-ml needs cgo
// on linux.
func Query(uuid string) Facts {
	return Facts{Reason: "built without cgo: NVML is loaded through cgo"}
}

// Load reports that NVML is unavailable: loading libnvidia-ml needs cgo on
// linux.
func Load() (Lib, error) {
	return nil, errors.New("built without cgo: NVML is loaded through cgo")
}
