package hamienv

import (
	"errors"
	"math"
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

// A pool's list overlays the process's environment: the process's
// variables count where the list does not set them, and the first setting
// of each wins.
func TestForPoolOverlaysTheProcess(t *testing.T) {
	t.Setenv(EnvSMLimit, "30")
	t.Setenv(EnvMemoryLimit, "8g")
	c, err := ForPool([]string{EnvMemoryLimit + "=1g", EnvMemoryLimit + "=2g"})
	if err != nil || c.MemoryLimitAll != 1<<30 || c.SMLimitAll != 30 {
		t.Fatalf("ForPool = %+v, %v; want the list's first 1g and the process's 30%%", c, err)
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
		{0, 0, total, ", the device's memory;"},
		{0, 16 << 30, 16 << 30, ", set by WithDeviceMemoryLimit;"},
		{1, 0, 8 << 30, ", set by CUDA_DEVICE_MEMORY_LIMIT;"},
		{1, 16 << 30, 8 << 30, ", set by CUDA_DEVICE_MEMORY_LIMIT;"},
		{1, 4 << 30, 4 << 30, ", set by WithDeviceMemoryLimit;"},
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

// Issue 38 #14: a quota one byte over a 16 GiB limit read "16 GiB is larger
// than the device limit of 16 GiB", and uint64(-1) "1.718e+10 GiB". The
// message says by how much, with the bytes where the unit rounds them.
func TestCheckQuotaSaysByHowMuch(t *testing.T) {
	var env Config
	err := env.CheckQuota(0, 80<<30, 16<<30, 16<<30+1)
	want := "memory quota 16 GiB (17179869185 bytes) is 1 byte over the device limit of 16 GiB, set by WithDeviceMemoryLimit; ask for at most 17179869184 bytes"
	if !errors.Is(err, errs.ErrInvalidArgument) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("one byte over: %v\nwant it to end %q", err, want)
	}
	err = env.CheckQuota(0, 80<<30, 80<<30, math.MaxUint64)
	if err == nil || strings.Contains(err.Error(), "e+") || !strings.Contains(err.Error(), "quota 16 EiB (18446744073709551615 bytes) is") {
		t.Errorf("uint64(-1): %v", err)
	}
}
