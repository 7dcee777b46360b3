//go:build cgo && linux

package nvml

import (
	"fmt"
	"strings"
	"sync"

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

// queryMu serialises queries: loading and closing a go-nvml library writes
// go-nvml's package-level state (its versioned symbols, its error-string
// function), which two instances loaded at once would race on. A sampler
// beside a metrics scrape queries concurrently.
var queryMu sync.Mutex

// QueryWith is Query against a given NVML (a mock in tests).
func QueryWith(lib Lib, uuid string) (f Facts) {
	queryMu.Lock()
	defer queryMu.Unlock()
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		return Facts{Reason: fmt.Sprintf("nvml init: %v", ret)}
	}
	defer lib.Shutdown()
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != gonvml.SUCCESS {
		return Facts{Reason: fmt.Sprintf("nvml has no device %s: %v", uuid, ret)}
	}
	f.Available = true
	// ok records a refusal and says whether the fact came back; each fact
	// is independent, so one refusal leaves the others filled.
	ok := func(fact string, ret gonvml.Return) bool {
		if ret != gonvml.SUCCESS {
			f.Refused = append(f.Refused, fmt.Sprintf("%s: %v", fact, ret))
			return false
		}
		return true
	}
	if name, ret := dev.GetName(); ok("name", ret) {
		f.Name = strings.TrimSpace(name)
	}
	if m, ret := dev.GetMemoryInfo(); ok("memory", ret) {
		f.MemoryTotal, f.MemoryUsed = m.Total, m.Used
	}
	if u, ret := dev.GetUtilizationRates(); ok("utilization", ret) {
		f.GPUUtil, f.MemUtil = u.Gpu, u.Memory
	}
	if v, ret := lib.SystemGetDriverVersion(); ok("driver version", ret) {
		f.Driver = v
	}
	if c, ret := dev.GetClockInfo(gonvml.CLOCK_SM); ok("SM clock", ret) {
		f.SMClockMHz = c
	}
	if c, ret := dev.GetMaxClockInfo(gonvml.CLOCK_SM); ok("max SM clock", ret) {
		f.SMClockMaxMHz = c
	}
	if p, ret := dev.GetPowerUsage(); ok("power draw", ret) {
		f.PowerMW = p
	}
	if p, ret := dev.GetEnforcedPowerLimit(); ok("power limit", ret) {
		f.PowerLimitMW = p
	}
	// go-nvml v0.13 has only the old name; it reads the same bits as
	// nvmlDeviceGetCurrentClocksEventReasons.
	if r, ret := dev.GetCurrentClocksThrottleReasons(); ok("clock reasons", ret) { //nolint:staticcheck
		f.ClockReasons = r
	}
	return f
}
