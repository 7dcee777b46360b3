package nvml

import (
	"os"
	"reflect"
	"testing"
)

// fakeLib is an NVML in Go: init succeeds, the one device is GPU-1.
type fakeLib struct {
	dev        Device
	init, down int
}

func (l *fakeLib) Init() Return     { l.init++; return SUCCESS }
func (l *fakeLib) Shutdown() Return { l.down++; return SUCCESS }
func (l *fakeLib) DeviceGetHandleByUUID(uuid string) (Device, Return) {
	if uuid != "GPU-1" {
		return nil, ERROR_NOT_FOUND
	}
	return l.dev, SUCCESS
}
func (l *fakeLib) SystemGetDriverVersion() (string, Return) { return "580.159.04", SUCCESS }

// fakeDev answers every fact as a power-capped H200 under a whole-chip GEMM
// would, except those named in refuse.
type fakeDev struct{ refuse map[string]Return }

func (d fakeDev) ret(fact string) Return { return d.refuse[fact] } // SUCCESS when absent

func (d fakeDev) GetName() (string, Return) { return "NVIDIA H200 ", d.ret("name") }
func (d fakeDev) GetMemoryInfo() (Memory, Return) {
	return Memory{Total: 100, Free: 60, Used: 40}, d.ret("memory")
}
func (d fakeDev) GetUtilizationRates() (Utilization, Return) {
	return Utilization{Gpu: 100, Memory: 30}, d.ret("utilization")
}
func (d fakeDev) GetClockInfo(c ClockType) (uint32, Return) {
	if c != CLOCK_SM {
		return 0, ERROR_INVALID_ARGUMENT
	}
	return 1755, d.ret("clock")
}
func (d fakeDev) GetMaxClockInfo(c ClockType) (uint32, Return) {
	if c != CLOCK_SM {
		return 0, ERROR_INVALID_ARGUMENT
	}
	return 1980, d.ret("max clock")
}
func (d fakeDev) GetPowerUsage() (uint32, Return)         { return 698_500, d.ret("power") }
func (d fakeDev) GetEnforcedPowerLimit() (uint32, Return) { return 700_000, d.ret("power limit") }
func (d fakeDev) GetCurrentClocksEventReasons() (uint64, Return) {
	return 4 | 8, d.ret("reasons") // SW power cap, HW slowdown
}
func (d fakeDev) GetComputeRunningProcesses() ([]ProcessInfo, Return) {
	return []ProcessInfo{{Pid: 1, UsedGpuMemory: 5}, {Pid: uint32(os.Getpid()), UsedGpuMemory: 25}}, d.ret("processes")
}

func TestQueryWithFake(t *testing.T) {
	nv := &fakeLib{dev: fakeDev{}}
	f := QueryWith(nv, "GPU-1")
	if !f.Available || f.Name != "NVIDIA H200" || f.MemoryUsed != 40 || f.GPUUtil != 100 || f.Driver != "580.159.04" {
		t.Fatalf("%+v", f)
	}
	if f := QueryWith(nv, "GPU-2"); f.Available || f.Reason != "nvml has no device GPU-2: ERROR_NOT_FOUND" {
		t.Fatalf("unknown device: %+v", f)
	}
	if nv.init != 2 || nv.down != 2 {
		t.Fatalf("Init %d times, Shutdown %d: each query must pair them", nv.init, nv.down)
	}
}

func TestQueryClocksAndPower(t *testing.T) {
	f := QueryWith(&fakeLib{dev: fakeDev{}}, "GPU-1")
	want := Facts{Available: true, Name: "NVIDIA H200", MemoryTotal: 100, MemoryUsed: 40, GPUUtil: 100, MemUtil: 30,
		Driver: "580.159.04", SMClockMHz: 1755, SMClockMaxMHz: 1980, PowerMW: 698_500, PowerLimitMW: 700_000,
		ClockReasons: 4 | 8, ProcessMemoryUsed: 25}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("got  %+v\nwant %+v", f, want)
	}
}

// A fact NVML refuses is zero and named in Refused; every other fact is
// still there.
func TestQueryRefusedFactsLeaveTheOthers(t *testing.T) {
	dev := fakeDev{refuse: map[string]Return{"power": ERROR_NOT_SUPPORTED, "reasons": ERROR_NO_PERMISSION, "name": ERROR_UNKNOWN, "processes": ERROR_NO_PERMISSION}}
	f := QueryWith(&fakeLib{dev: dev}, "GPU-1")
	if !f.Available || f.SMClockMHz != 1755 || f.SMClockMaxMHz != 1980 || f.PowerLimitMW != 700_000 || f.MemoryUsed != 40 || f.Driver == "" {
		t.Fatalf("a refusal took other facts with it: %+v", f)
	}
	if f.PowerMW != 0 || f.ClockReasons != 0 || f.Name != "" {
		t.Fatalf("refused facts must stay zero: %+v", f)
	}
	want := []string{"name: ERROR_UNKNOWN", "power draw: ERROR_NOT_SUPPORTED", "clock reasons: ERROR_NO_PERMISSION", "process memory: ERROR_NO_PERMISSION"}
	if !reflect.DeepEqual(f.Refused, want) {
		t.Fatalf("Refused %q, want %q", f.Refused, want)
	}
}

func TestReturnString(t *testing.T) {
	for r, want := range map[Return]string{SUCCESS: "SUCCESS", ERROR_FUNCTION_NOT_FOUND: "ERROR_FUNCTION_NOT_FOUND",
		ERROR_UNKNOWN: "ERROR_UNKNOWN", 77: "unknown return value: 77"} {
		if got := r.String(); got != want {
			t.Errorf("Return(%d) = %q, want %q", int32(r), got, want)
		}
	}
}

func TestQueryWithoutNVMLSaysWhy(t *testing.T) {
	f := Query("GPU-0")
	if f.Available {
		t.Skip("NVML is present on this machine")
	}
	if f.Reason == "" {
		t.Fatal("an empty Facts must say why")
	}
}

// A simulated device is not looked for: its Facts say why they are empty.
func TestQueryDeviceSimulated(t *testing.T) {
	f := QueryDevice("GPU-1", true)
	if f.Available || f.Reason != "simulated device" || f.Name != "" {
		t.Fatalf("QueryDevice(simulated) = %+v", f)
	}
}
