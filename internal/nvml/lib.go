//go:build cgo && linux

package nvml

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// DefaultPath is the library Query loads: the soname the driver installs.
const DefaultPath = "libnvidia-ml.so.1"

// Library is libnvidia-ml loaded through the shim. Its entry points are
// resolved once and only read afterwards, so it serves many goroutines at
// once; NVML itself is thread-safe and counts Init and Shutdown.
type Library struct {
	l *C.fcsp_nvml
}

var (
	openMu sync.Mutex
	opened = map[string]*Library{} // by path; a library once loaded stays loaded
)

// Open loads the library at path (DefaultPath for Query), or returns the
// one already loaded from it. A library that fails to load is tried again
// at the next Open: it may be installed meanwhile.
func Open(path string) (*Library, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if l := opened[path]; l != nil {
		return l, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	l := C.fcsp_nvml_open(cpath, &buf[0], C.int(len(buf)))
	if l == nil {
		return nil, fmt.Errorf("%v: %s", ERROR_LIBRARY_NOT_FOUND, C.GoString(&buf[0]))
	}
	lib := &Library{l: l}
	opened[path] = lib
	return lib, nil
}

// Query asks NVML for the GPU with this UUID ("GPU-..."). A missing library
// is not an error: the Facts say so.
func Query(uuid string) Facts {
	lib, err := Open(DefaultPath)
	if err != nil {
		return Facts{Reason: "nvml init: " + err.Error()}
	}
	return QueryWith(lib, uuid)
}

func (l *Library) Init() Return     { return Return(C.fcsp_nvml_init(l.l)) }
func (l *Library) Shutdown() Return { return Return(C.fcsp_nvml_shutdown(l.l)) }

// Buffer sizes from nvml.h: NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE and
// NVML_DEVICE_NAME_V2_BUFFER_SIZE.
const (
	driverVersionLen = 80
	deviceNameLen    = 96
)

func (l *Library) SystemGetDriverVersion() (string, Return) {
	var buf [driverVersionLen]C.char
	if r := Return(C.fcsp_nvml_driver_version(l.l, &buf[0], C.uint(len(buf)))); r != SUCCESS {
		return "", r
	}
	return C.GoString(&buf[0]), SUCCESS
}

func (l *Library) DeviceGetHandleByUUID(uuid string) (Device, Return) {
	cuuid := C.CString(uuid)
	defer C.free(unsafe.Pointer(cuuid))
	var d C.fcsp_nvml_device
	if r := Return(C.fcsp_nvml_device_by_uuid(l.l, cuuid, &d)); r != SUCCESS {
		return nil, r
	}
	return device{l: l.l, d: d}, SUCCESS
}

// device is an nvmlDevice_t, a pointer NVML owns: it is valid while NVML
// is initialised, which QueryWith keeps it for every use.
type device struct {
	l *C.fcsp_nvml
	d C.fcsp_nvml_device
}

func (d device) GetName() (string, Return) {
	var buf [deviceNameLen]C.char
	if r := Return(C.fcsp_nvml_name(d.l, d.d, &buf[0], C.uint(len(buf)))); r != SUCCESS {
		return "", r
	}
	return C.GoString(&buf[0]), SUCCESS
}

func (d device) GetMemoryInfo() (Memory, Return) {
	var m C.fcsp_nvml_memory
	r := Return(C.fcsp_nvml_memory_info(d.l, d.d, &m))
	return Memory{Total: uint64(m.total), Free: uint64(m.free), Used: uint64(m.used)}, r
}

func (d device) GetUtilizationRates() (Utilization, Return) {
	var u C.fcsp_nvml_utilization
	r := Return(C.fcsp_nvml_utilization_rates(d.l, d.d, &u))
	return Utilization{Gpu: uint32(u.gpu), Memory: uint32(u.memory)}, r
}

func (d device) GetClockInfo(t ClockType) (uint32, Return) {
	var v C.uint
	r := Return(C.fcsp_nvml_clock(d.l, d.d, C.int(t), &v))
	return uint32(v), r
}

func (d device) GetMaxClockInfo(t ClockType) (uint32, Return) {
	var v C.uint
	r := Return(C.fcsp_nvml_max_clock(d.l, d.d, C.int(t), &v))
	return uint32(v), r
}

func (d device) GetPowerUsage() (uint32, Return) {
	var v C.uint
	r := Return(C.fcsp_nvml_power_usage(d.l, d.d, &v))
	return uint32(v), r
}

func (d device) GetEnforcedPowerLimit() (uint32, Return) {
	var v C.uint
	r := Return(C.fcsp_nvml_power_limit(d.l, d.d, &v))
	return uint32(v), r
}

func (d device) GetComputeRunningProcesses() ([]ProcessInfo, Return) {
	n := 64 // a GPU's processes, usually; NVML says how many where more
	for range 3 {
		buf := make([]C.fcsp_nvml_process, n)
		count := C.uint(n)
		r := Return(C.fcsp_nvml_processes(d.l, d.d, &count, &buf[0]))
		if r == ERROR_INSUFFICIENT_SIZE {
			n = max(int(count)+8, 2*n) // processes may start meanwhile
			continue
		}
		if r != SUCCESS {
			return nil, r
		}
		ps := make([]ProcessInfo, min(int(count), n))
		for i := range ps {
			ps[i] = ProcessInfo{Pid: uint32(buf[i].pid), UsedGpuMemory: uint64(buf[i].used)}
		}
		return ps, SUCCESS
	}
	return nil, ERROR_INSUFFICIENT_SIZE
}

// Load loads DefaultPath (see Open).
func Load() (Lib, error) { return Open(DefaultPath) }

func (d device) GetCurrentClocksEventReasons() (uint64, Return) {
	var v C.ulonglong
	r := Return(C.fcsp_nvml_clock_reasons(d.l, d.d, &v))
	return uint64(v), r
}
