package hamienv

import (
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/bytesize"
	envpkg "github.com/fcsp-go/fcsp-go/internal/environ"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// ForPool is the configuration a pool reads: none where environ is nil
// (the pool was not asked to read HAMi-core's variables), else ParseEnv's
// of environ laid over the process's environment (internal/environ), with
// a bad value matching errs.ErrInvalidArgument.
func ForPool(environ []string) (Config, error) {
	if environ == nil {
		return Config{}, nil
	}
	c, err := ParseEnv(envpkg.Over(environ))
	if err != nil {
		return Config{}, fmt.Errorf("%w: %w", errs.ErrInvalidArgument, err)
	}
	return c, nil
}

// DeviceLimit is device dev's memory limit for a pool: its total memory,
// lowered by set (fcsp.WithDeviceMemoryLimit; 0: none) and by dev's
// CUDA_DEVICE_MEMORY_LIMIT.
func (c Config) DeviceLimit(dev int, total, set uint64) uint64 {
	limit := total
	if set != 0 {
		limit = min(limit, set)
	}
	if b, ok := c.MemoryLimit(dev); ok {
		limit = min(limit, b)
	}
	return limit
}

// CheckQuota refuses a tenant quota the pool could never grant: more than
// device dev's limit (DeviceLimit of total), wherever that limit comes
// from, which the error names, with how far over it the quota is.
func (c Config) CheckQuota(dev int, total, limit, quota uint64) error {
	if quota <= limit {
		return nil
	}
	from := "the device's memory"
	if b, ok := c.MemoryLimit(dev); ok && b == limit {
		from = "set by CUDA_DEVICE_MEMORY_LIMIT"
	} else if limit < total {
		from = "set by WithDeviceMemoryLimit"
	}
	return fmt.Errorf("%w: memory quota %s is %s over the device limit of %s, %s; ask for at most %d bytes",
		errs.ErrInvalidArgument, bytesize.Format(quota), bytesize.Format(quota-limit), bytesize.Format(limit), from, limit)
}
