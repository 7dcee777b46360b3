package nvml

import (
	"fmt"
	"os"
	"strings"
)

// Return is an NVML return code (nvmlReturn_t).
type Return int32

// The NVML return codes, as nvml.h numbers them.
const (
	SUCCESS                         Return = 0
	ERROR_UNINITIALIZED             Return = 1
	ERROR_INVALID_ARGUMENT          Return = 2
	ERROR_NOT_SUPPORTED             Return = 3
	ERROR_NO_PERMISSION             Return = 4
	ERROR_ALREADY_INITIALIZED       Return = 5
	ERROR_NOT_FOUND                 Return = 6
	ERROR_INSUFFICIENT_SIZE         Return = 7
	ERROR_INSUFFICIENT_POWER        Return = 8
	ERROR_DRIVER_NOT_LOADED         Return = 9
	ERROR_TIMEOUT                   Return = 10
	ERROR_IRQ_ISSUE                 Return = 11
	ERROR_LIBRARY_NOT_FOUND         Return = 12
	ERROR_FUNCTION_NOT_FOUND        Return = 13
	ERROR_CORRUPTED_INFOROM         Return = 14
	ERROR_GPU_IS_LOST               Return = 15
	ERROR_RESET_REQUIRED            Return = 16
	ERROR_OPERATING_SYSTEM          Return = 17
	ERROR_LIB_RM_VERSION_MISMATCH   Return = 18
	ERROR_IN_USE                    Return = 19
	ERROR_MEMORY                    Return = 20
	ERROR_NO_DATA                   Return = 21
	ERROR_VGPU_ECC_NOT_SUPPORTED    Return = 22
	ERROR_INSUFFICIENT_RESOURCES    Return = 23
	ERROR_FREQ_NOT_SUPPORTED        Return = 24
	ERROR_ARGUMENT_VERSION_MISMATCH Return = 25
	ERROR_DEPRECATED                Return = 26
	ERROR_NOT_READY                 Return = 27
	ERROR_GPU_NOT_FOUND             Return = 28
	ERROR_INVALID_STATE             Return = 29
	ERROR_UNKNOWN                   Return = 999
)

var returnNames = map[Return]string{
	SUCCESS: "SUCCESS", ERROR_UNINITIALIZED: "ERROR_UNINITIALIZED", ERROR_INVALID_ARGUMENT: "ERROR_INVALID_ARGUMENT",
	ERROR_NOT_SUPPORTED: "ERROR_NOT_SUPPORTED", ERROR_NO_PERMISSION: "ERROR_NO_PERMISSION",
	ERROR_ALREADY_INITIALIZED: "ERROR_ALREADY_INITIALIZED", ERROR_NOT_FOUND: "ERROR_NOT_FOUND",
	ERROR_INSUFFICIENT_SIZE: "ERROR_INSUFFICIENT_SIZE", ERROR_INSUFFICIENT_POWER: "ERROR_INSUFFICIENT_POWER",
	ERROR_DRIVER_NOT_LOADED: "ERROR_DRIVER_NOT_LOADED", ERROR_TIMEOUT: "ERROR_TIMEOUT", ERROR_IRQ_ISSUE: "ERROR_IRQ_ISSUE",
	ERROR_LIBRARY_NOT_FOUND: "ERROR_LIBRARY_NOT_FOUND", ERROR_FUNCTION_NOT_FOUND: "ERROR_FUNCTION_NOT_FOUND",
	ERROR_CORRUPTED_INFOROM: "ERROR_CORRUPTED_INFOROM", ERROR_GPU_IS_LOST: "ERROR_GPU_IS_LOST",
	ERROR_RESET_REQUIRED: "ERROR_RESET_REQUIRED", ERROR_OPERATING_SYSTEM: "ERROR_OPERATING_SYSTEM",
	ERROR_LIB_RM_VERSION_MISMATCH: "ERROR_LIB_RM_VERSION_MISMATCH", ERROR_IN_USE: "ERROR_IN_USE",
	ERROR_MEMORY: "ERROR_MEMORY", ERROR_NO_DATA: "ERROR_NO_DATA", ERROR_VGPU_ECC_NOT_SUPPORTED: "ERROR_VGPU_ECC_NOT_SUPPORTED",
	ERROR_INSUFFICIENT_RESOURCES: "ERROR_INSUFFICIENT_RESOURCES", ERROR_FREQ_NOT_SUPPORTED: "ERROR_FREQ_NOT_SUPPORTED",
	ERROR_ARGUMENT_VERSION_MISMATCH: "ERROR_ARGUMENT_VERSION_MISMATCH", ERROR_DEPRECATED: "ERROR_DEPRECATED",
	ERROR_NOT_READY: "ERROR_NOT_READY", ERROR_GPU_NOT_FOUND: "ERROR_GPU_NOT_FOUND", ERROR_INVALID_STATE: "ERROR_INVALID_STATE",
	ERROR_UNKNOWN: "ERROR_UNKNOWN",
}

// String is the code's name in nvml.h without the NVML_ prefix
// ("ERROR_NOT_SUPPORTED"): stable across drivers, unlike
// nvmlErrorString's prose, so logs and Facts.Refused can be matched.
func (r Return) String() string {
	if s, ok := returnNames[r]; ok {
		return s
	}
	return fmt.Sprintf("unknown return value: %d", int32(r))
}

// ClockType is nvmlClockType_t.
type ClockType int32

// CLOCK_SM is the SM clock domain.
const CLOCK_SM ClockType = 1

// Memory is nvmlMemory_t: bytes on the device, used counting every process
// (and the driver's reservation).
type Memory struct{ Total, Free, Used uint64 }

// Utilization is nvmlUtilization_t: percent of the last sample period a
// kernel ran (Gpu) and memory was read or written (Memory).
type Utilization struct{ Gpu, Memory uint32 }

// Lib is the part of NVML Query uses: the shim's Library, or a fake in
// tests.
type Lib interface {
	Init() Return
	Shutdown() Return
	DeviceGetHandleByUUID(uuid string) (Device, Return)
	SystemGetDriverVersion() (string, Return)
}

// Device is one GPU's handle.
type Device interface {
	GetName() (string, Return)
	GetMemoryInfo() (Memory, Return)
	GetUtilizationRates() (Utilization, Return)
	GetClockInfo(ClockType) (uint32, Return)
	GetMaxClockInfo(ClockType) (uint32, Return)
	GetPowerUsage() (uint32, Return)         // milliwatts
	GetEnforcedPowerLimit() (uint32, Return) // milliwatts
	GetCurrentClocksEventReasons() (uint64, Return)
	// GetComputeRunningProcesses lists the processes with a context on
	// the device (nvmlDeviceGetComputeRunningProcesses_v3).
	GetComputeRunningProcesses() ([]ProcessInfo, Return)
}

// ProcessInfo is one compute process on a device (nvmlProcessInfo_t):
// its pid and the device memory it uses, ValueNotAvailable where NVML
// does not say (some containers, and Windows' WDDM mode).
type ProcessInfo struct {
	Pid           uint32
	UsedGpuMemory uint64
}

// ValueNotAvailable is NVML_VALUE_NOT_AVAILABLE as usedGpuMemory holds it.
const ValueNotAvailable = ^uint64(0)

// processUsed is the device memory NVML reports for pid on dev: an error
// says why there is none (not listed: NVML lists pids of its own PID
// namespace, the host's where the process runs in a container; or listed
// without its memory).
func processUsed(dev Device, pid int) (uint64, error) {
	ps, ret := dev.GetComputeRunningProcesses()
	if ret != SUCCESS {
		return 0, fmt.Errorf("nvml compute processes: %v", ret)
	}
	return usedBy(ps, pid)
}

// usedBy is pid's device memory among the processes NVML listed.
func usedBy(ps []ProcessInfo, pid int) (uint64, error) {
	for _, p := range ps {
		if int(p.Pid) != pid {
			continue
		}
		if p.UsedGpuMemory == ValueNotAvailable {
			return 0, fmt.Errorf("NVML lists the process without its memory (NVML_VALUE_NOT_AVAILABLE), as in some containers: %v", ERROR_NOT_SUPPORTED)
		}
		return p.UsedGpuMemory, nil
	}
	return 0, fmt.Errorf("pid %d is not among the %d compute processes NVML lists on the device (in a container NVML lists the host's pids): %v", pid, len(ps), ERROR_NOT_FOUND)
}

// Session is NVML kept initialised for one device, for a sampler that
// reads the process's memory many times: one Init and handle lookup, not
// one per reading. Close shuts NVML down. Safe for concurrent use, as
// NVML is.
type Session struct {
	lib Lib
	dev Device
}

// OpenSession initialises lib and finds the device with this UUID.
func OpenSession(lib Lib, uuid string) (*Session, error) {
	if ret := lib.Init(); ret != SUCCESS {
		return nil, fmt.Errorf("nvml init: %v", ret)
	}
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("nvml has no device %s: %v", uuid, ret)
	}
	return &Session{lib: lib, dev: dev}, nil
}

// ProcessUsed is the device memory NVML reports for pid now.
func (s *Session) ProcessUsed(pid int) (uint64, error) { return processUsed(s.dev, pid) }

// Close shuts NVML down (the session's Init).
func (s *Session) Close() { s.lib.Shutdown() }

// QueryWith is Query against a given NVML (a fake in tests).
func QueryWith(lib Lib, uuid string) (f Facts) {
	if ret := lib.Init(); ret != SUCCESS {
		return Facts{Reason: fmt.Sprintf("nvml init: %v", ret)}
	}
	defer lib.Shutdown()
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != SUCCESS {
		return Facts{Reason: fmt.Sprintf("nvml has no device %s: %v", uuid, ret)}
	}
	f.Available = true
	// ok records a refusal and says whether the fact came back; each fact
	// is independent, so one refusal leaves the others filled.
	ok := func(fact string, ret Return) bool {
		if ret != SUCCESS {
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
	if c, ret := dev.GetClockInfo(CLOCK_SM); ok("SM clock", ret) {
		f.SMClockMHz = c
	}
	if c, ret := dev.GetMaxClockInfo(CLOCK_SM); ok("max SM clock", ret) {
		f.SMClockMaxMHz = c
	}
	if p, ret := dev.GetPowerUsage(); ok("power draw", ret) {
		f.PowerMW = p
	}
	if p, ret := dev.GetEnforcedPowerLimit(); ok("power limit", ret) {
		f.PowerLimitMW = p
	}
	if r, ret := dev.GetCurrentClocksEventReasons(); ok("clock reasons", ret) {
		f.ClockReasons = r
	}
	if ps, ret := dev.GetComputeRunningProcesses(); ok("process memory", ret) {
		f.ProcessMemoryUsed, _ = usedBy(ps, os.Getpid()) // 0 where NVML does not say
	}
	return f
}

// QueryDevice is Query for a pool's device: a simulated one (the fake
// driver's) has no NVML, which the Facts say.
func QueryDevice(uuid string, simulated bool) Facts {
	if simulated {
		return Facts{Reason: "simulated device"}
	}
	return Query(uuid)
}
