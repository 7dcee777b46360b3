package fcsp

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGPUNVMLClocksAndPower: on the GPU machine NVML gives the SM clock
// (within its maximum), the power draw and the enforced limit; it logs the
// facts and how long one Pool.NVML call takes (NVML is opened and closed
// per call), which bounds how often examples/gemm can sample.
func TestGPUNVMLClocksAndPower(t *testing.T) {
	p := openGPU(t)
	var took []time.Duration
	var f NVMLFacts
	for range 5 {
		t0 := time.Now()
		f = p.NVML()
		took = append(took, time.Since(t0))
	}
	slices.Sort(took)
	t.Logf("NVML: %+v", f)
	t.Logf("reasons: %v; one Pool.NVML call: median %v, max %v", f.ClockReasons, took[2], took[4])
	require.True(t, f.Available, "NVML on the GPU machine: %s", f.Reason)
	require.Empty(t, f.Refused, "facts NVML refused on this board")
	require.Greater(t, f.SMClockMaxMHz, uint32(1000), "max SM clock")
	require.Greater(t, f.SMClockMHz, uint32(0), "SM clock")
	require.LessOrEqual(t, f.SMClockMHz, f.SMClockMaxMHz, "SM clock within its maximum")
	require.Greater(t, f.PowerW, 1.0, "power draw")
	require.Greater(t, f.PowerLimitW, 100.0, "power limit")
	require.Less(t, f.PowerW, 1.5*f.PowerLimitW, "power draw near or under its limit")
}
