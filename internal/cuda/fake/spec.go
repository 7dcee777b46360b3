package fake

import "github.com/fcsp-go/fcsp-go/internal/cuda"

// Spec describes the simulated device.
type Spec struct {
	Name         string
	SMs          uint32
	MinPartition uint32 // smallest group the driver will make (minSmPartitionSize)
	Alignment    uint32 // group sizes are multiples of this (smCoscheduledAlignment)
	MaxGroups    int    // most co-scheduled groups one split returns (0: no cap beyond SMs)
	// LooseMinPartition and LooseAlignment apply when a split ignores SM
	// co-scheduling (CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING).
	LooseMinPartition uint32
	LooseAlignment    uint32
	TotalMem          uint64
	CCMajor           int
	CCMinor           int
	MaxThreadsPerSM   int
	APIVersion        int // what cuDriverGetVersion says; 13000+ fills minSmPartitionSize
	Devices           int // devices visible (default 1)
	// PoolChunk is the unit in which a stream-ordered pool maps device
	// memory and to which its maximum size is rounded up (0: cuda.PoolChunk).
	PoolChunk uint64
}

// H200 describes the lent NVIDIA H200 as measured (testdata/h200-split-probe.tsv,
// every minimum count with and without co-scheduling): 132 SMs, groups of 8
// aligned to 8, at most 15 co-scheduled groups (the driver leaves 12 SMs over
// at minCount 8, not 4), and groups of 2 when co-scheduling is ignored.
func H200() Spec {
	return Spec{
		Name: "NVIDIA H200", SMs: 132, MinPartition: 8, Alignment: 8, MaxGroups: 15, LooseMinPartition: 2, LooseAlignment: 2,
		TotalMem: 143771 << 20, CCMajor: 9, CCMinor: 0, MaxThreadsPerSM: 2048, APIVersion: 13000, Devices: 1,
		PoolChunk: cuda.PoolChunk, // fcsp.TestGPUPoolProbe
	}
}

// T4 describes the Tesla T4 of the day-94 lesson: 40 SMs in groups of 2.
func T4() Spec {
	return Spec{
		Name: "Tesla T4", SMs: 40, MinPartition: 2, Alignment: 2, LooseMinPartition: 2, LooseAlignment: 2,
		TotalMem: 15360 << 20, CCMajor: 7, CCMinor: 5, MaxThreadsPerSM: 1024, APIVersion: 13000, Devices: 1,
	}
}

// groupSize is the SM count of each group a split of an n-SM resource at
// minCount makes: the request raised to the minimum partition and rounded up
// to the alignment (both 2 on Hopper when co-scheduling is ignored), and the
// whole resource when that rounding passes its size (seen on the H200 for
// minimum counts 129 to 132).
func (s Spec) groupSize(n, minCount, flags uint32) uint32 {
	mp, al := s.MinPartition, s.Alignment
	if flags&cuda.SplitIgnoreCoscheduling != 0 {
		mp, al = s.LooseMinPartition, s.LooseAlignment
	}
	g := max(minCount, mp, 1)
	if a := max(al, 1); g%a != 0 {
		g += a - g%a
	}
	return min(g, n)
}

// splitCount is how many groups that split makes. Only co-scheduled splits
// are capped by MaxGroups.
func (s Spec) splitCount(n, minCount, flags uint32) int {
	c := int(n / s.groupSize(n, minCount, flags))
	if s.MaxGroups > 0 && c > s.MaxGroups && flags&cuda.SplitIgnoreCoscheduling == 0 {
		c = s.MaxGroups
	}
	return c
}
