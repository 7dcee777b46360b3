package fcsp

import "github.com/fcsp-go/fcsp-go/internal/cuda/fake"

// Simulated describes a fake device for WithSimulator. The fake follows the
// real driver's rules: SM splits by granularity, alignment and co-scheduling
// limit (replaying what the H200 measured), out-of-memory, error codes.
type Simulated struct{ spec fake.Spec }

// SimulatedH200 is the lent NVIDIA H200 as measured: 132 SMs in groups of 8,
// 143771 MiB.
func SimulatedH200() Simulated { return Simulated{fake.H200()} }

// SimulatedT4 is the Tesla T4 of the day-94 lesson: 40 SMs in groups of 2.
func SimulatedT4() Simulated { return Simulated{fake.T4()} }

// WithMemory returns a copy with total device memory set to bytes.
func (s Simulated) WithMemory(bytes uint64) Simulated { s.spec.TotalMem = bytes; return s }
