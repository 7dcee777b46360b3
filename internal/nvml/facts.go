package nvml

import (
	"fmt"
	"math/bits"
	"strings"
)

// Facts is what NVML says about one GPU. Each fact is asked for on its own:
// one that NVML refuses (not supported on this board, no permission) stays
// zero and is named in Refused, and the others are still filled.
type Facts struct {
	Available   bool   // false: NVML could not be used; Reason says why
	Reason      string //
	Name        string
	MemoryTotal uint64 // bytes
	MemoryUsed  uint64 // bytes, all processes
	// ProcessMemoryUsed is this process's part of MemoryUsed, as NVML
	// lists it among the device's compute processes; 0 where it is not
	// listed (in a container NVML lists the host's pids).
	ProcessMemoryUsed uint64
	GPUUtil           uint32 // percent of time a kernel ran, last sample period
	MemUtil           uint32 // percent of time memory was read or written
	Driver            string // driver version string

	SMClockMHz    uint32 // SM clock now
	SMClockMaxMHz uint32 // highest SM clock the board runs at
	PowerMW       uint32 // board power draw, milliwatts
	PowerLimitMW  uint32 // power limit enforced now, milliwatts
	// ClockReasons is NVML's bit set of reasons the clocks are below their
	// maximum (nvmlClocksEventReason*, formerly "throttle reasons").
	ClockReasons uint64
	// Refused says, per fact NVML refused, which and NVML's answer, e.g.
	// "power draw: ERROR_NOT_SUPPORTED".
	Refused []string
}

// ReasonNames names the clock reasons in r, comma-separated in bit order
// ("power cap, hw slowdown"), bits it has no name for in hex after them;
// "none" for the empty set.
func ReasonNames(r uint64) string {
	if r == 0 {
		return "none"
	}
	var names []string
	for v := r; v != 0; v &= v - 1 {
		if b := bits.TrailingZeros64(v); b < len(reasonNames) {
			names = append(names, reasonNames[b])
		}
	}
	if unknown := r &^ (1<<len(reasonNames) - 1); unknown != 0 {
		names = append(names, fmt.Sprintf("%#x", unknown))
	}
	return strings.Join(names, ", ")
}

// reasonNames are NVML's clock reason bits 0 to 10, in order.
var reasonNames = [...]string{
	"idle", "app clocks", "power cap", "hw slowdown", "sync boost", "sw thermal",
	"hw thermal", "hw power brake", "display clocks", "board limit", "reliability",
}
