package hamienv

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	envpkg "github.com/fcsp-go/fcsp-go/internal/environ"
)

// Variable names.
const (
	EnvMemoryLimit = "CUDA_DEVICE_MEMORY_LIMIT"
	EnvSMLimit     = "CUDA_DEVICE_SM_LIMIT"
	EnvSharedCache = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
)

// DefaultSharedCache is HAMi-core's default shared region path.
const DefaultSharedCache = "/tmp/cudevshr.cache"

// MaxDevices bounds the <i> of per-device variables.
const MaxDevices = 1024

// ErrInvalid is matched by every error Parse returns.
var ErrInvalid = errors.New("invalid HAMi-core setting") // no package prefix: fcsp wraps it as its own

// Config is HAMi-core's configuration for this process. The zero Config
// means no limits and the default shared cache path.
type Config struct {
	// MemoryLimitAll is CUDA_DEVICE_MEMORY_LIMIT in bytes; 0 = none.
	MemoryLimitAll uint64
	// MemoryLimits holds CUDA_DEVICE_MEMORY_LIMIT_<i> values that are not 0.
	MemoryLimits map[int]uint64
	// SMLimitAll is CUDA_DEVICE_SM_LIMIT in percent; 0 = none.
	SMLimitAll int
	// SMLimits holds CUDA_DEVICE_SM_LIMIT_<i> values that are set.
	SMLimits map[int]int
	// SharedCache is CUDA_DEVICE_MEMORY_SHARED_CACHE, or DefaultSharedCache.
	SharedCache string
}

// MemoryLimit returns the memory limit of device dev in bytes, and whether
// there is one.
func (c Config) MemoryLimit(dev int) (bytes uint64, limited bool) {
	if v, ok := c.MemoryLimits[dev]; ok && v > 0 {
		return v, true
	}
	return c.MemoryLimitAll, c.MemoryLimitAll > 0
}

// SMLimit returns the fraction (0, 1) of device dev's SMs this process may
// use, and whether there is a limit. A per-device value overrides the
// global one, including a per-device 0 or >= 100 that lifts it.
func (c Config) SMLimit(dev int) (fraction float64, limited bool) {
	p, ok := c.SMLimits[dev]
	if !ok {
		p = c.SMLimitAll
	}
	if p <= 0 || p >= 100 {
		return 1, false
	}
	return float64(p) / 100, true
}

// Parse reads the HAMi-core variables from environ (os.Environ() form,
// "KEY=value"), alone: ParseEnv of environ over nothing.
func Parse(environ []string) (Config, error) { return ParseEnv(envpkg.Of(environ, nil)) }

// ParseEnv reads the HAMi-core variables from env, by its rules (the first
// setting wins; a list overlays the process's environment). Other
// variables are ignored. Every bad value is an error (matching ErrInvalid)
// naming the variable, the value and what is allowed.
func ParseEnv(env envpkg.Env) (Config, error) {
	c := Config{SharedCache: DefaultSharedCache}
	var errs []error
	env.Each(func(key, val string) {
		switch {
		case key == EnvMemoryLimit:
			v, err := ParseMemory(val)
			if err != nil {
				errs = append(errs, varErr(key, val, err))
				return
			}
			c.MemoryLimitAll = v
		case key == EnvSMLimit:
			v, err := ParseSMLimit(val)
			if err != nil {
				errs = append(errs, varErr(key, val, err))
				return
			}
			c.SMLimitAll = v
		case key == EnvSharedCache:
			p, err := ParseSharedCache(val)
			if err != nil {
				errs = append(errs, varErr(key, val, err))
				return
			}
			c.SharedCache = p
		case strings.HasPrefix(key, EnvMemoryLimit+"_"):
			dev, err := parseDevice(key[len(EnvMemoryLimit)+1:])
			if err != nil {
				errs = append(errs, varErr(key, val, err))
				return
			}
			v, err := ParseMemory(val)
			if err != nil {
				errs = append(errs, varErr(key, val, err))
				return
			}
			if v > 0 {
				if c.MemoryLimits == nil {
					c.MemoryLimits = make(map[int]uint64)
				}
				c.MemoryLimits[dev] = v
			}
		case strings.HasPrefix(key, EnvSMLimit+"_"):
			dev, err := parseDevice(key[len(EnvSMLimit)+1:])
			if err != nil {
				errs = append(errs, varErr(key, val, err))
				return
			}
			v, err := ParseSMLimit(val)
			if err != nil {
				errs = append(errs, varErr(key, val, err))
				return
			}
			if c.SMLimits == nil {
				c.SMLimits = make(map[int]int)
			}
			c.SMLimits[dev] = v
		}
	})
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

func varErr(key, val string, err error) error {
	return fmt.Errorf("%w: %s=%q: %v", ErrInvalid, key, val, err)
}

func parseDevice(s string) (int, error) {
	if !isDecimal(s) || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("device index %q is not a decimal number without leading zeros", s)
	}
	d, err := strconv.Atoi(s)
	if err != nil || d >= MaxDevices {
		return 0, fmt.Errorf("device index %s is out of range; 0 to %d are allowed", s, MaxDevices-1)
	}
	return d, nil
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ParseMemory parses a HAMi-core memory limit: a decimal number of bytes
// with an optional k/K, m/M or g/G suffix (powers of 1024). The empty
// string and 0 mean no limit and return 0.
func ParseMemory(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	num, scale := s, uint64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		num, scale = s[:len(s)-1], 1<<10
	case 'm', 'M':
		num, scale = s[:len(s)-1], 1<<20
	case 'g', 'G':
		num, scale = s[:len(s)-1], 1<<30
	}
	const allowed = "allowed: a decimal number of bytes, optionally followed by k, m or g (KiB, MiB, GiB), e.g. 4096m or 8g; 0 means no limit"
	if !isDecimal(num) {
		return 0, fmt.Errorf("not a memory size; %s", allowed)
	}
	if len(num) > 1 && num[0] == '0' {
		return 0, fmt.Errorf("leading zero is ambiguous (HAMi-core would read it as octal); %s", allowed)
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil || v > math.MaxUint64/scale {
		return 0, fmt.Errorf("memory size overflows 64 bits; %s", allowed)
	}
	return v * scale, nil
}

// ParseSMLimit parses a HAMi-core SM limit: a decimal percentage. 0 and
// values of 100 or more mean no limit; the empty string is 0.
func ParseSMLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	const allowed = "allowed: a whole percentage such as 30; 0 or 100 and above mean no limit"
	if !isDecimal(s) {
		return 0, fmt.Errorf("not a whole percentage; %s", allowed)
	}
	v, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		// Only ever too large: any huge percentage means no limit.
		return 100, nil
	}
	return int(v), nil
}

// ParseSharedCache validates CUDA_DEVICE_MEMORY_SHARED_CACHE: an absolute
// path. The empty string means DefaultSharedCache.
func ParseSharedCache(s string) (string, error) {
	if s == "" {
		return DefaultSharedCache, nil
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("path contains a NUL byte; an absolute file path is allowed")
	}
	if !filepath.IsAbs(s) {
		return "", fmt.Errorf("path is relative; an absolute file path such as %s is allowed", DefaultSharedCache)
	}
	if strings.HasSuffix(s, "/") {
		return "", fmt.Errorf("path names a directory; an absolute file path is allowed")
	}
	return filepath.Clean(s), nil
}
