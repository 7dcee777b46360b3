package hamienv

import (
	"errors"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

func TestForPool(t *testing.T) {
	c, err := ForPool(nil)
	if err != nil || c.MemoryLimitAll != 0 || c.SharedCache != "" {
		t.Fatalf("ForPool(nil) = %+v, %v; want the zero Config", c, err)
	}
	c, err = ForPool([]string{"CUDA_DEVICE_MEMORY_LIMIT=1g"})
	if err != nil || c.MemoryLimitAll != 1<<30 {
		t.Fatalf("ForPool = %+v, %v", c, err)
	}
	_, err = ForPool([]string{"CUDA_DEVICE_MEMORY_LIMIT=lots"})
	if !errors.Is(err, errs.ErrInvalidArgument) || !errors.Is(err, ErrInvalid) ||
		!strings.HasPrefix(err.Error(), "fcsp: invalid argument: ") {
		t.Fatalf("a bad value: %v", err)
	}
}

func TestDeviceLimitAndCheckQuota(t *testing.T) {
	const total = 80 << 30
	env, err := ForPool([]string{"CUDA_DEVICE_MEMORY_LIMIT_1=8g"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dev       int
		set, want uint64
		from      string
	}{
		{0, 0, total, "(the device's memory)"},
		{0, 16 << 30, 16 << 30, "(WithDeviceMemoryLimit)"},
		{1, 0, 8 << 30, "(CUDA_DEVICE_MEMORY_LIMIT)"},
		{1, 16 << 30, 8 << 30, "(CUDA_DEVICE_MEMORY_LIMIT)"},
		{1, 4 << 30, 4 << 30, "(WithDeviceMemoryLimit)"},
	} {
		limit := env.DeviceLimit(c.dev, total, c.set)
		if limit != c.want {
			t.Errorf("DeviceLimit(%d, set %d) = %d; want %d", c.dev, c.set, limit, c.want)
		}
		if err := env.CheckQuota(c.dev, total, limit, limit); err != nil {
			t.Errorf("a quota of the whole limit: %v", err)
		}
		err := env.CheckQuota(c.dev, total, limit, limit+1)
		if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), c.from) {
			t.Errorf("dev %d set %d: %v; want it to name %s", c.dev, c.set, err, c.from)
		}
	}
}
