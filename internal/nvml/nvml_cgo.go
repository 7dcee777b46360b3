//go:build cgo && linux

package nvml

import (
	"fmt"
	"strings"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Lib is the subset of go-nvml's interface used here, so tests can hand in
// go-nvml's own mocks.
type Lib interface {
	Init() gonvml.Return
	Shutdown() gonvml.Return
	DeviceGetHandleByUUID(string) (gonvml.Device, gonvml.Return)
	SystemGetDriverVersion() (string, gonvml.Return)
}

// Query asks NVML for the GPU with this UUID ("GPU-..."). A missing library
// is not an error: the Facts say so.
func Query(uuid string) Facts { return QueryWith(gonvml.New(), uuid) }

// QueryWith is Query against a given NVML (a mock in tests).
func QueryWith(lib Lib, uuid string) (f Facts) {
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		return Facts{Reason: fmt.Sprintf("nvml init: %v", ret)}
	}
	defer lib.Shutdown()
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != gonvml.SUCCESS {
		return Facts{Reason: fmt.Sprintf("nvml has no device %s: %v", uuid, ret)}
	}
	f.Available = true
	f.Name, _ = dev.GetName()
	if m, ret := dev.GetMemoryInfo(); ret == gonvml.SUCCESS {
		f.MemoryTotal, f.MemoryUsed = m.Total, m.Used
	}
	if u, ret := dev.GetUtilizationRates(); ret == gonvml.SUCCESS {
		f.GPUUtil, f.MemUtil = u.Gpu, u.Memory
	}
	f.Driver, _ = lib.SystemGetDriverVersion()
	f.Name = strings.TrimSpace(f.Name)
	return f
}
