//go:build cgo && linux

package nvml

import (
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func TestQueryWithMock(t *testing.T) {
	dev := &mock.Device{
		GetNameFunc:       func() (string, gonvml.Return) { return "NVIDIA H200", gonvml.SUCCESS },
		GetMemoryInfoFunc: func() (gonvml.Memory, gonvml.Return) { return gonvml.Memory{Total: 100, Used: 40}, gonvml.SUCCESS },
		GetUtilizationRatesFunc: func() (gonvml.Utilization, gonvml.Return) {
			return gonvml.Utilization{Gpu: 75, Memory: 20}, gonvml.SUCCESS
		},
	}
	lib := &mock.Interface{
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
	f := QueryWith(lib, "GPU-1")
	if !f.Available || f.Name != "NVIDIA H200" || f.MemoryUsed != 40 || f.GPUUtil != 75 || f.Driver != "580.159.04" {
		t.Fatalf("%+v", f)
	}
	if f := QueryWith(lib, "GPU-2"); f.Available || f.Reason == "" {
		t.Fatalf("unknown device: %+v", f)
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
