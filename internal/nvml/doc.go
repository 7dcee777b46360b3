// Package nvml reads device facts (name, memory, utilization, clocks,
// power, the reasons the clocks are held down) through
// github.com/NVIDIA/go-nvml where libnvidia-ml.so.1 is present. go-nvml
// needs cgo; builds without it, or machines without NVML, get a Facts value
// that says why it is empty instead of an error, since NVML only adds
// detail: the SM count and memory the SDK enforces come from the driver.
package nvml
