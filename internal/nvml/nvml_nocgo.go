//go:build !cgo || !linux

package nvml

// Query reports that NVML is unavailable: go-nvml needs cgo on linux.
func Query(uuid string) Facts {
	return Facts{Reason: "built without cgo: go-nvml unavailable"}
}
