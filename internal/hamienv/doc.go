// Package hamienv reads HAMi-core's environment variables, so that a Go
// process using fcsp-go in a pod scheduled by HAMi gets the limits HAMi's
// device plugin injected, exactly as libvgpu.so would have read them.
//
// Variables:
//
//	CUDA_DEVICE_MEMORY_LIMIT         memory limit of every device
//	CUDA_DEVICE_MEMORY_LIMIT_<i>     memory limit of device i (overrides)
//	CUDA_DEVICE_SM_LIMIT             SM (compute) percentage of every device
//	CUDA_DEVICE_SM_LIMIT_<i>         SM percentage of device i (overrides)
//	CUDA_DEVICE_MEMORY_SHARED_CACHE  path of the shared accounting file
//	                                 (default /tmp/cudevshr.cache)
//
// Memory values follow HAMi-core's get_limit_from_env: a decimal number
// with an optional binary suffix k/K (KiB), m/M (MiB) or g/G (GiB). A bare
// number is bytes, as in HAMi-core (its scale factor defaults to 1). 0 or an
// empty value means no limit, and a per-device 0 falls back to the global
// value, as HAMi-core's do_init_device_memory_limits does.
//
// Where HAMi-core is lax this package is strict, so that a typo fails loudly
// instead of silently disabling a limit: HAMi-core uses strtoul with base 0
// and ignores trailing garbage, so "0x10m" is hex, "010m" is octal and
// "4gb" is 4; here those are errors. SM limits are plain percentages; 0 or
// 100 and above mean no limit.
//
// The variables are read through internal/environ, by the rules every
// reader of the SDK's environment shares: when a variable appears twice the
// first occurrence wins, like getenv(3) and os.Getenv; and a pool's list
// (fcsp.WithEnviron) overlays the process's environment.
package hamienv
