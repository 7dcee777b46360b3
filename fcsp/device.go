package fcsp

import (
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// DeviceInfo is what the pool knows of its GPU.
type DeviceInfo struct {
	Index             int
	Name              string
	UUID              string
	ComputeCapability string
	SMs               int    // from the driver's SM resource
	Granularity       int    // smallest SM group the driver cuts
	Alignment         int    // group sizes are multiples of this
	ThreadsPerSM      int    // resident threads per SM
	TotalMemory       uint64 // bytes
	DriverAPI         int    // cuDriverGetVersion
	Driver            string // which binding: libcuda.so.1 or the fake
	Simulated         bool
	// WorkQueues is the number of hardware work queues (connections) the
	// process's contexts get: CUDA_DEVICE_MAX_CONNECTIONS, which the pool
	// sets to 32 when it is unset (workqueues.go), else the driver's 8.
	WorkQueues int
}

func (d DeviceInfo) String() string {
	sim := ""
	if d.Simulated {
		sim = " [simulated]"
	}
	return fmt.Sprintf("GPU %d: %s%s, sm_%s, %d SMs (groups of %d), %.1f GiB, driver API %d",
		d.Index, d.Name, sim, d.ComputeCapability, d.SMs, d.Granularity, float64(d.TotalMemory)/(1<<30), d.DriverAPI)
}

func readDeviceInfo(drv cuda.Driver, dev cuda.Device, index int) (DeviceInfo, error) {
	info := DeviceInfo{Index: index, Driver: drv.Name()}
	var err error
	if info.Name, err = drv.DeviceName(dev); err != nil {
		return info, err
	}
	u, err := drv.DeviceUUID(dev)
	if err != nil {
		return info, err
	}
	info.UUID = fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	major, err := drv.DeviceAttribute(dev, cuda.AttrComputeCapabilityMajor)
	if err != nil {
		return info, err
	}
	minor, err := drv.DeviceAttribute(dev, cuda.AttrComputeCapabilityMinor)
	if err != nil {
		return info, err
	}
	info.ComputeCapability = fmt.Sprintf("%d%d", major, minor)
	if info.ThreadsPerSM, err = drv.DeviceAttribute(dev, cuda.AttrMaxThreadsPerSM); err != nil {
		return info, err
	}
	if info.TotalMemory, err = drv.DeviceTotalMem(dev); err != nil {
		return info, err
	}
	info.DriverAPI, err = drv.DriverVersion()
	return info, err
}
