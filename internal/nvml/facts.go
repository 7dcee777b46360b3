package nvml

// Facts is what NVML says about one GPU.
type Facts struct {
	Available   bool   // false: NVML could not be used; Reason says why
	Reason      string //
	Name        string
	MemoryTotal uint64 // bytes
	MemoryUsed  uint64 // bytes, all processes
	GPUUtil     uint32 // percent of time a kernel ran, last sample period
	MemUtil     uint32 // percent of time memory was read or written
	Driver      string // driver version string
}
