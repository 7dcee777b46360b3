//go:build !cgo || !linux

package nvml

// Query reports that NVML is unavailable: loading libnvidia-ml needs cgo
// on linux.
func Query(uuid string) Facts {
	return Facts{Reason: "built without cgo: NVML is loaded through cgo"}
}
