package cuda

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// Handles are opaque driver pointers carried as integers, so that they can be
// handed to any other binding (cast with unsafe.Pointer(uintptr(h))).
type (
	Device       int32
	Context      uintptr
	GreenCtx     uintptr
	Stream       uintptr
	Event        uintptr
	Module       uintptr
	Function     uintptr
	ResourceDesc uintptr
	DevicePtr    uint64
	MemPool      uintptr
)

// entry points added for lib: CUDA graphs.
type (
	Graph     uintptr // CUgraph
	GraphExec uintptr // CUgraphExec
)

// Stream capture modes (CUstreamCaptureMode).
const (
	CaptureModeGlobal      = 0 // other threads' unsafe calls fail during the capture
	CaptureModeThreadLocal = 1 // only this thread's unsafe calls fail
	CaptureModeRelaxed     = 2 // nothing is refused
)

// Pointer converts a handle to the unsafe.Pointer a cgo binding takes. The
// handle came from the driver as a pointer, so this is the reverse of the
// conversion that produced it; reading it through memory rather than with
// unsafe.Pointer(uintptr(h)) keeps go vet's unsafeptr check quiet.
func Pointer[T ~uintptr](h T) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&h)) }

// PoolAttribute is a CUmemPool_attribute (the 64-bit ones).
type PoolAttribute int32

const (
	PoolReleaseThreshold   PoolAttribute = 4 // bytes kept cached across synchronisations
	PoolReservedMemCurrent PoolAttribute = 5 // bytes the pool holds from the driver
	PoolUsedMemCurrent     PoolAttribute = 7 // bytes handed out and not freed
)

// Attribute is a CUdevice_attribute.
type Attribute int32

const (
	AttrMaxThreadsPerBlock Attribute = 1
	AttrMaxBlockDimX       Attribute = 2
	AttrMaxBlockDimY       Attribute = 3
	AttrMaxBlockDimZ       Attribute = 4
	AttrMaxGridDimX        Attribute = 5
	AttrMaxGridDimY        Attribute = 6
	AttrMaxGridDimZ        Attribute = 7
	// AttrMaxSharedMemoryPerBlock is the most shared memory a block may
	// have without opting in (cuFuncSetAttribute, which the SDK does not
	// call): the most dynamic shared memory a launch may ask for.
	AttrMaxSharedMemoryPerBlock      Attribute = 8
	AttrMaxSharedMemoryPerBlockOptin Attribute = 97
	AttrMultiprocessorCount          Attribute = 16
	AttrComputeCapabilityMajor       Attribute = 75
	AttrComputeCapabilityMinor       Attribute = 76
	AttrMaxThreadsPerSM              Attribute = 39
	AttrClockRate                    Attribute = 13
)

// Flags used by the SDK.
const (
	StreamNonBlocking       uint32 = 0x1 // CU_STREAM_NON_BLOCKING: required by cuGreenCtxStreamCreate
	GreenCtxDefaultStream   uint32 = 0x1 // CU_GREEN_CTX_DEFAULT_STREAM: required by cuGreenCtxCreate
	SplitIgnoreCoscheduling uint32 = 0x1 // CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING
	SplitMaxClusterSize     uint32 = 0x2 // CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE
	EventDefault            uint32 = 0x0
	EventBlockingSync       uint32 = 0x1 // CU_EVENT_BLOCKING_SYNC: cuEventSynchronize sleeps rather than spins
	EventDisableTiming      uint32 = 0x2 // CU_EVENT_DISABLE_TIMING: for ordering only (branch whole)
)

// StreamPriorityGreatest asks cuGreenCtxStreamCreate for the device's
// greatest stream priority: lower numbers are greater, the range is the
// device's (cuCtxGetStreamPriorityRange), and the driver clamps a number
// past either end to that end.
const StreamPriorityGreatest = -1 << 16

// ResourceType is a CUdevResourceType.
type ResourceType int32

// ResourceSM is CU_DEV_RESOURCE_TYPE_SM.
const ResourceSM ResourceType = 1

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Count is X*Y*Z, the number of blocks or threads.
func (d Dim3) Count() uint64 { return uint64(d.X) * uint64(d.Y) * uint64(d.Z) }

// Valid reports whether every dimension is at least 1.
func (d Dim3) Valid() bool { return d.X > 0 && d.Y > 0 && d.Z > 0 }

// ResourceSize is sizeof(CUdevResource) on every driver API version seen
// (12.4 through 13.x): type, 92 bytes of padding, a 48-byte union, and on
// 13.1+ a nextResource pointer inside the tail.
const ResourceSize = 144

// Byte offsets inside CUdevResource. The SM member starts after the type and
// the padding; minSmPartitionSize and smCoscheduledAlignment exist from
// driver API 13.0 on.
const (
	offType         = 0
	offSMCount      = 96
	offMinPartition = 100
	offCoschedAlign = 104
)

// DevResource is one CUdevResource, kept as the driver's own bytes so that it
// can be handed back to cuDevResourceGenerateDesc unchanged.
type DevResource struct {
	Raw [ResourceSize]byte
}

// Type is the resource's CUdevResourceType.
func (r *DevResource) Type() ResourceType {
	return ResourceType(binary.LittleEndian.Uint32(r.Raw[offType:]))
}

// SMCount is the number of SMs in an SM resource.
func (r *DevResource) SMCount() uint32 { return binary.LittleEndian.Uint32(r.Raw[offSMCount:]) }

// SMInfo decodes the SM member for a driver of API version apiVersion
// (cuDriverGetVersion's number). Fields the driver does not have are zero.
func (r *DevResource) SMInfo(apiVersion int) SMInfo {
	info := SMInfo{Count: r.SMCount()}
	if apiVersion >= 13000 {
		info.MinPartition = binary.LittleEndian.Uint32(r.Raw[offMinPartition:])
		info.CoscheduledAlignment = binary.LittleEndian.Uint32(r.Raw[offCoschedAlign:])
	}
	return info
}

// SetSM writes the SM member; the fake driver uses it to build resources.
func (r *DevResource) SetSM(info SMInfo) {
	binary.LittleEndian.PutUint32(r.Raw[offType:], uint32(ResourceSM))
	binary.LittleEndian.PutUint32(r.Raw[offSMCount:], info.Count)
	binary.LittleEndian.PutUint32(r.Raw[offMinPartition:], info.MinPartition)
	binary.LittleEndian.PutUint32(r.Raw[offCoschedAlign:], info.CoscheduledAlignment)
}

// SMInfo is the decoded CUdevSmResource.
type SMInfo struct {
	Count                uint32 // smCount
	MinPartition         uint32 // minSmPartitionSize (API 13.0+), else 0
	CoscheduledAlignment uint32 // smCoscheduledAlignment (API 13.0+), else 0
}

func (s SMInfo) String() string {
	return fmt.Sprintf("%d SMs (min partition %d, alignment %d)", s.Count, s.MinPartition, s.CoscheduledAlignment)
}
