// Package nvml reads device facts (name, memory, utilization, clocks,
// power, the reasons the clocks are held down) from libnvidia-ml.so.1,
// loaded with dlopen by a small C shim, as internal/cuda loads libcuda: the
// module builds on machines without NVML and without its header, and the
// shim declares only the dozen entry points it calls. Builds without cgo,
// or machines without NVML, get a Facts value that says why it is empty
// instead of an error, since NVML only adds detail: the SM count and memory
// the SDK enforces come from the driver.
package nvml
