//go:build cgo && linux

package nvml

import (
	"reflect"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func TestQueryWithMock(t *testing.T) {
	dev := h200()
	nv := &mock.Interface{
		InitFunc:     func() gonvml.Return { return gonvml.SUCCESS },
		ShutdownFunc: func() gonvml.Return { return gonvml.SUCCESS },
		DeviceGetHandleByUUIDFunc: func(uuid string) (gonvml.Device, gonvml.Return) {
			if uuid != "GPU-1" {
				return nil, gonvml.ERROR_NOT_FOUND
			}
			return dev, gonvml.SUCCESS
		},
		SystemGetDriverVersionFunc: func() (string, gonvml.Return) { return "580.159.04", gonvml.SUCCESS },
	}
	f := QueryWith(nv, "GPU-1")
	if !f.Available || f.Name != "NVIDIA H200" || f.MemoryUsed != 40 || f.GPUUtil != 100 || f.Driver != "580.159.04" {
		t.Fatalf("%+v", f)
	}
	if f := QueryWith(nv, "GPU-2"); f.Available || f.Reason == "" {
		t.Fatalf("unknown device: %+v", f)
	}
}

// h200 is a mock device answering every fact, as a power-capped H200 under
// a whole-chip GEMM would.
func h200() *mock.Device {
	return &mock.Device{
		GetNameFunc:       func() (string, gonvml.Return) { return "NVIDIA H200 ", gonvml.SUCCESS },
		GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{Total: 100, Used: 40}, gonvml.SUCCESS },
		GetUtilizationRatesFunc: func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{Gpu: 100, Memory: 30}, gonvml.SUCCESS
		},
		GetClockInfoFunc: func(c gonvml.ClockType) (uint32, gonvml.Return) {
			if c != gonvml.CLOCK_SM {
				return 0, gonvml.ERROR_INVALID_ARGUMENT
			}
			return 1755, gonvml.SUCCESS
		},
		GetMaxClockInfoFunc: func(c gonvml.ClockType) (uint32, gonvml.Return) {
			if c != gonvml.CLOCK_SM {
				return 0, gonvml.ERROR_INVALID_ARGUMENT
			}
			return 1980, gonvml.SUCCESS
		},
		GetPowerUsageFunc:         func() (uint32, gonvml.Return) { return 698_500, gonvml.SUCCESS },
		GetEnforcedPowerLimitFunc: func() (uint32, gonvml.Return) { return 700_000, gonvml.SUCCESS },
		GetCurrentClocksThrottleReasonsFunc: func() (uint64, gonvml.Return) {
			return gonvml.ClocksThrottleReasonSwPowerCap | gonvml.ClocksThrottleReasonHwSlowdown, gonvml.SUCCESS
		},
	}
}

func lib(dev gonvml.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:     func() gonvml.Return { return gonvml.SUCCESS },
		ShutdownFunc: func() gonvml.Return { return gonvml.SUCCESS },
		DeviceGetHandleByUUIDFunc: func(string) (gonvml.Device, gonvml.Return) {
			return dev, gonvml.SUCCESS
		},
		SystemGetDriverVersionFunc: func() (string, gonvml.Return) { return "580.159.04", gonvml.SUCCESS },
	}
}

func TestQueryClocksAndPower(t *testing.T) {
	f := QueryWith(lib(h200()), "GPU-1")
	want := Facts{Available: true, Name: "NVIDIA H200", MemoryTotal: 100, MemoryUsed: 40, GPUUtil: 100, MemUtil: 30,
		Driver: "580.159.04", SMClockMHz: 1755, SMClockMaxMHz: 1980, PowerMW: 698_500, PowerLimitMW: 700_000,
		ClockReasons: 4 | 8}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("got  %+v\nwant %+v", f, want)
	}
}

// A fact NVML refuses is zero and named in Refused; every other fact is
// still there.
func TestQueryRefusedFactsLeaveTheOthers(t *testing.T) {
	dev := h200()
	dev.GetPowerUsageFunc = func() (uint32, gonvml.Return) { return 0, gonvml.ERROR_NOT_SUPPORTED }
	dev.GetCurrentClocksThrottleReasonsFunc = func() (uint64, gonvml.Return) { return 0, gonvml.ERROR_NO_PERMISSION }
	dev.GetNameFunc = func() (string, gonvml.Return) { return "", gonvml.ERROR_UNKNOWN }
	f := QueryWith(lib(dev), "GPU-1")
	if !f.Available || f.SMClockMHz != 1755 || f.SMClockMaxMHz != 1980 || f.PowerLimitMW != 700_000 || f.MemoryUsed != 40 || f.Driver == "" {
		t.Fatalf("a refusal took other facts with it: %+v", f)
	}
	if f.PowerMW != 0 || f.ClockReasons != 0 || f.Name != "" {
		t.Fatalf("refused facts must stay zero: %+v", f)
	}
	want := []string{"name: ERROR_UNKNOWN", "power draw: ERROR_NOT_SUPPORTED", "clock reasons: ERROR_NO_PERMISSION"}
	if !reflect.DeepEqual(f.Refused, want) {
		t.Fatalf("Refused %q, want %q", f.Refused, want)
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
