package fcsp

import "github.com/fcsp-go/fcsp-go/internal/nvml"

// ClockReasons is the set of reasons NVML gives for the GPU's clocks being
// below their maximum (NVML's clocks event reasons, once called throttle
// reasons). The bits are NVML's own, so a reason added by a later driver
// survives as an unnamed bit; String shows it in hex.
//
// A serving stack reads it beside its throughput: under ClockPowerCap the
// board is at its power limit and every partition runs slower, for reasons
// no partitioning can change.
type ClockReasons uint64

const (
	// ClockIdle: nothing is running and the clocks are dropping to idle.
	ClockIdle ClockReasons = 1 << 0
	// ClockAppSetting: clocks set to application-specific values.
	ClockAppSetting ClockReasons = 1 << 1
	// ClockPowerCap: the software power cap holds the board at its power
	// limit (NVMLFacts.PowerLimitW).
	ClockPowerCap ClockReasons = 1 << 2
	// ClockHWSlowdown: the hardware halved the clocks or more (temperature,
	// an external power brake, or a power draw spike).
	ClockHWSlowdown ClockReasons = 1 << 3
	// ClockSyncBoost: the GPU is in a sync boost group held to its slowest
	// member.
	ClockSyncBoost ClockReasons = 1 << 4
	// ClockSWThermal: clocks lowered to keep GPU or memory temperature
	// below their operating maximum.
	ClockSWThermal ClockReasons = 1 << 5
	// ClockHWThermal: the hardware slowdown is for temperature.
	ClockHWThermal ClockReasons = 1 << 6
	// ClockHWPowerBrake: the hardware slowdown is an external power brake
	// (e.g. the system's power supply).
	ClockHWPowerBrake ClockReasons = 1 << 7
	// ClockDisplaySetting: limited by the display clock setting.
	ClockDisplaySetting ClockReasons = 1 << 8
	// ClockBoardLimit: the board's operating-limit policy.
	ClockBoardLimit ClockReasons = 1 << 9
	// ClockReliability: the reliability policy.
	ClockReliability ClockReasons = 1 << 10
)

// Has reports whether every reason in q is in r.
func (r ClockReasons) Has(q ClockReasons) bool { return r&q == q }

// String names the reasons, comma-separated in bit order ("power cap, hw
// slowdown"); "none" for the empty set.
func (r ClockReasons) String() string { return nvml.ReasonNames(uint64(r)) }

// nvmlFacts converts internal/nvml's answer to the exported form.
func nvmlFacts(f nvml.Facts) NVMLFacts {
	return NVMLFacts{Available: f.Available, Reason: f.Reason, Refused: f.Refused, Name: f.Name,
		MemoryTotal: f.MemoryTotal, MemoryUsed: f.MemoryUsed, ProcessMemoryUsed: f.ProcessMemoryUsed, GPUUtil: f.GPUUtil, MemUtil: f.MemUtil, Driver: f.Driver,
		SMClockMHz: f.SMClockMHz, SMClockMaxMHz: f.SMClockMaxMHz,
		PowerW: float64(f.PowerMW) / 1e3, PowerLimitW: float64(f.PowerLimitMW) / 1e3,
		ClockReasons: ClockReasons(f.ClockReasons)}
}
