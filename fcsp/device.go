package fcsp

import "github.com/fcsp-go/fcsp-go/internal/smpart"

// DeviceInfo is what the pool knows of its GPU.
type DeviceInfo struct {
	Index             int
	Name              string
	UUID              string
	ComputeCapability string
	SMs               int // from the driver's SM resource
	Granularity       int // smallest SM group the driver cuts
	Alignment         int // group sizes are multiples of this
	// PartitionUnit is the size of the groups the pool's partitions are
	// made of (WithPartitionUnit, or Granularity); 0 where the device
	// cannot be partitioned in this process.
	PartitionUnit int
	ThreadsPerSM  int    // resident threads per SM
	TotalMemory   uint64 // bytes
	DriverAPI     int    // cuDriverGetVersion
	Driver        string // which binding: libcuda.so.1 or the fake
	Simulated     bool
	// WorkQueues is the number of hardware work queues (connections) the
	// process's contexts get: CUDA_DEVICE_MAX_CONNECTIONS, which the pool
	// sets to 32 when it is unset, else the driver's 8.
	WorkQueues int
	// Caveats says what in this process's environment keeps its
	// partitions from being its own: an NVIDIA MPS client (whose
	// neighbours' kernels share the SMs), an LD_PRELOAD layer that
	// interposes on the driver. Open logs each as a warning; empty where
	// nothing was found.
	Caveats []string
}

// String is one line for logs: "GPU 0: NVIDIA H200, sm_90, 132 SMs (groups of
// 8), 139.8 GiB, driver API 13000", with " [simulated]" after the name on
// the simulator.
func (d DeviceInfo) String() string { return smpart.Description(d).String() }
