package cuda

// Driver is the part of the CUDA driver API the SDK uses. Calls that depend
// on a context take it explicitly; implementations make it current for the
// duration of the call only. Every error is an *Error wrapping a Result.
//
// StreamSynchronize, EventSynchronize, LaunchKernel, MemAllocFromPoolAsync
// and MemFreeAsync also accept a zero
// context, meaning "make none current: the stream (or event) names it", so
// that a long wait need not hold a green context current on one thread
// while other threads wait to use it. Whether the driver accepts that is
// learned at run time (see fcsp), never assumed.
type Driver interface {
	// Name says which implementation this is ("libcuda.so.1 (API 13000)", "fake ...").
	Name() string
	DriverVersion() (int, error)

	DeviceCount() (int, error)
	DeviceGet(ordinal int) (Device, error)
	DeviceName(Device) (string, error)
	DeviceUUID(Device) ([16]byte, error)
	DeviceAttribute(Device, Attribute) (int, error)
	DeviceTotalMem(Device) (uint64, error)

	PrimaryCtxRetain(Device) (Context, error)
	PrimaryCtxRelease(Device) error
	// CtxCreate makes an ordinary (non-primary) context; the SDK uses it only
	// as a baseline in benchmarks. It leaves no context current.
	CtxCreate(Device) (Context, error)
	CtxDestroy(Context) error
	CtxSynchronize(Context) error

	MemAlloc(ctx Context, bytes uint64) (DevicePtr, error)
	MemFree(ctx Context, p DevicePtr) error
	MemGetInfo(ctx Context) (free, total uint64, err error)
	MemcpyHtoD(ctx Context, dst DevicePtr, src []byte) error
	MemcpyDtoH(ctx Context, dst []byte, src DevicePtr) error

	StreamCreate(ctx Context, flags uint32) (Stream, error)
	StreamDestroy(ctx Context, s Stream) error
	StreamSynchronize(ctx Context, s Stream) error

	EventCreate(ctx Context, flags uint32) (Event, error)
	EventRecord(ctx Context, e Event, s Stream) error
	EventSynchronize(ctx Context, e Event) error
	EventElapsedMs(ctx Context, start, end Event) (float32, error)
	EventDestroy(ctx Context, e Event) error

	ModuleLoadData(ctx Context, image []byte) (Module, error)
	ModuleUnload(ctx Context, m Module) error
	ModuleGetFunction(ctx Context, m Module, name string) (Function, error)
	LaunchKernel(ctx Context, f Function, grid, block Dim3, sharedMem uint32, s Stream, args *Args) error

	// Stream-ordered pools. maxSize caps what the pool may hold from the
	// driver (0: the driver's default).
	MemPoolCreate(ctx Context, d Device, maxSize uint64) (MemPool, error)
	MemPoolDestroy(ctx Context, p MemPool) error
	MemAllocFromPoolAsync(ctx Context, bytes uint64, p MemPool, s Stream) (DevicePtr, error)
	MemFreeAsync(ctx Context, ptr DevicePtr, s Stream) error
	MemPoolTrimTo(ctx Context, p MemPool, keep uint64) error
	MemPoolSetAttribute(ctx Context, p MemPool, a PoolAttribute, v uint64) error
	MemPoolGetAttribute(ctx Context, p MemPool, a PoolAttribute) (uint64, error)

	DeviceGetDevResource(d Device, t ResourceType) (DevResource, error)
	// DevSmResourceSplitByCount is cuDevSmResourceSplitByCount. With
	// maxGroups 0 it only asks how many groups the driver would make (null
	// result array) and returns that count with no groups; otherwise it
	// makes at most maxGroups groups and returns them with the remainder.
	DevSmResourceSplitByCount(input DevResource, flags, minCount uint32, maxGroups int) (groups []DevResource, remainder DevResource, n int, err error)
	DevResourceGenerateDesc(res []DevResource) (ResourceDesc, error)
	GreenCtxCreate(desc ResourceDesc, d Device, flags uint32) (GreenCtx, error)
	GreenCtxDestroy(g GreenCtx) error
	CtxFromGreenCtx(g GreenCtx) (Context, error)
	GreenCtxStreamCreate(g GreenCtx, flags uint32, priority int) (Stream, error)
	GreenCtxGetDevResource(g GreenCtx, t ResourceType) (DevResource, error)

	// entry points added for branch whole

	// StreamWaitEvent is cuStreamWaitEvent (flags 0): work queued on s
	// after it waits for e's last record, which may be in another context
	// of the device. A zero ctx makes none current.
	StreamWaitEvent(ctx Context, s Stream, e Event) error
}
