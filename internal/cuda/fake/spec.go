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
	// PrimaryCtxCost is device memory a retained primary context holds
	// beside what it keeps of green contexts (out of MemGetInfo's free and
	// in ProcessMemory), which no SDK figure counts. On an H100 (driver
	// 580) the driver's used memory was 534 MiB after a pool's Open. 0 in
	// every spec here: a test sets it.
	PrimaryCtxCost uint64
	// The launch limits, as cuDeviceGetAttribute answers them; a launch
	// past one fails with CUDA_ERROR_INVALID_VALUE, as on the GPU. Zero
	// takes every NVIDIA GPU's since Volta (withLimits).
	MaxGrid                [3]uint32 // CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, _Y, _Z
	MaxBlock               [3]uint32 // CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, _Y, _Z
	MaxThreadsPerBlock     uint32    // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	MaxSharedPerBlock      uint32    // _MAX_SHARED_MEMORY_PER_BLOCK: dynamic shared memory without opting in
	MaxSharedPerBlockOptin uint32    // _MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (cuFuncSetAttribute, which the SDK never calls)
}

// H200 describes the lent NVIDIA H200 as measured (testdata/h200-split-probe.tsv,
// every minimum count with and without co-scheduling): 132 SMs, groups of 8
// aligned to 8, at most 15 co-scheduled groups (the driver leaves 12 SMs over
// at minCount 8, not 4), and groups of 2 when co-scheduling is ignored.
func H200() Spec {
	return Spec{
		Name: "NVIDIA H200", SMs: 132, MinPartition: 8, Alignment: 8, MaxGroups: 15, LooseMinPartition: 2, LooseAlignment: 2,
		TotalMem: 143771 << 20, CCMajor: 9, CCMinor: 0, MaxThreadsPerSM: 2048, APIVersion: 13000, Devices: 1,
		PoolChunk:         cuda.PoolChunk, // fcsp.TestGPUPoolProbe
		MaxSharedPerBlock: 48 << 10, MaxSharedPerBlockOptin: 227 << 10,
	}
}

// T4 describes the Tesla T4 of the day-94 lesson: 40 SMs in groups of 2.
func T4() Spec {
	return Spec{
		Name: "Tesla T4", SMs: 40, MinPartition: 2, Alignment: 2, LooseMinPartition: 2, LooseAlignment: 2,
		TotalMem: 15360 << 20, CCMajor: 7, CCMinor: 5, MaxThreadsPerSM: 1024, APIVersion: 13000, Devices: 1,
		MaxSharedPerBlock: 48 << 10, MaxSharedPerBlockOptin: 64 << 10,
	}
}

// withLimits fills the launch limits left zero with those of every NVIDIA
// GPU since Volta: grids of 2^31-1 x 65535 x 65535 blocks, blocks of 1024
// threads at most 1024 x 1024 x 64, 48 KiB of shared memory per block
// without opting in.
func (s Spec) withLimits() Spec {
	def := func(v *uint32, d uint32) {
		if *v == 0 {
			*v = d
		}
	}
	for i, d := range [3]uint32{1<<31 - 1, 65535, 65535} {
		def(&s.MaxGrid[i], d)
	}
	for i, d := range [3]uint32{1024, 1024, 64} {
		def(&s.MaxBlock[i], d)
	}
	def(&s.MaxThreadsPerBlock, 1024)
	def(&s.MaxSharedPerBlock, 48<<10)
	def(&s.MaxSharedPerBlockOptin, s.MaxSharedPerBlock)
	return s
}

// launchable says a launch of grid x block with shmem bytes of dynamic
// shared memory is within the device's limits: every dimension at least 1
// and at most its attribute, the block's threads at most the attribute,
// the shared memory at most what a block may have without opting in.
func (s Spec) launchable(grid, block cuda.Dim3, shmem uint32) bool {
	if !grid.Valid() || !block.Valid() {
		return false
	}
	g, b := [3]uint32{grid.X, grid.Y, grid.Z}, [3]uint32{block.X, block.Y, block.Z}
	for i := range g {
		if g[i] > s.MaxGrid[i] || b[i] > s.MaxBlock[i] {
			return false
		}
	}
	return block.Count() <= uint64(s.MaxThreadsPerBlock) && shmem <= s.MaxSharedPerBlock
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
