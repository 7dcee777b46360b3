package main

// The table: one row per driver entry point (and per Go method of the
// interfaces). Everything the binding says about an entry point is here;
// `go generate ./internal/cuda` writes it into shim.h, shim_entries.h,
// zz_generated_shim.c, zz_generated_libcuda.go and zz_generated_driver.go.
// internal/cuda/doc.go says how to add a row.
//
// Fields:
//
//	Sym      the pointer (p_Sym) and the shim (fcsp_Sym); a row with no Sym is
//	         a Go method with no entry point of its own (Name, DriverVersion).
//	Names    the symbols dlsym tries, in order (versioned names first: the
//	         plain ones are the legacy ABI); default {Sym}; none with CustomC
//	         and no pointer of its own (CtxCreate, which uses two rows').
//	Params   the driver function's C parameters, named. With a generated
//	         wrapper the shim takes the same ones (after CUcontext c when
//	         pushed) and passes them through; "unsigned flags=0" is always
//	         passed as 0 and is no parameter of the shim or the method.
//	Ctx      free: no context; pushed: push c, call, pop in one cgo call;
//	         pushedOrNone: as pushed, but a zero c calls with none pushed.
//	Required fcsp_missing_required names it when absent; Load then fails.
//	Method   the Go method (signature as in an interface); "" for entry
//	         points only the C side calls (cuInit, push, pop).
//	Iface    "Driver" (production calls it) or "Baseline" (only tests,
//	         benchmarks and examples do).
//	Doc      the method's comment in the interface.
//	Op       the name errors carry; default Names[0].
//	CustomC  the shim's parameters where shim.c holds a hand-written body.
//	CustomGo the Go method is hand-written in libcuda.go.
//	Shim     the shim's name where it is not fcsp_Sym.
//	Release  a destroy/free/unload call: the Guard lets it through on a lost
//	         device so that closing a lost pool still frees what it made.
//	Makes    the object (ObjStream, ...) the call makes: the Guard's Maker
//	         is asked before (and may refuse) and told after (the handle,
//	         the error). MakeSize is what it is told the object's size is
//	         (a module's: len(image)).
//	Unmakes  the object the call destroys (its handle: the first parameter
//	         of its type): the Guard's Maker is told before the call.
//
// Generated Go wrappers map the shim's parameters to the method's by name:
// a parameter named like a Go parameter is converted from it (handles,
// the uintptr types of types.go, through handle()); a pointer parameter
// that names none is an output, the next of the method's results; the
// shim's context c is the method's first parameter.
var table = []entry{
	{Method: "Name() string", CustomGo: true, Iface: driver,
		Doc: `Name says which implementation this is ("libcuda.so.1 (API 13000)", "fake ...").`},
	{Sym: "cuInit", Params: "unsigned flags"},
	{Sym: "cuDriverGetVersion", Params: "int *v", Required: true,
		Method: "DriverVersion() (int, error)", CustomGo: true, Iface: driver},

	{Sym: "cuDeviceGetCount", Params: "int *n", Method: "DeviceCount() (int, error)", Iface: driver},
	{Sym: "cuDeviceGet", Params: "CUdevice *d, int ordinal", Required: true,
		Method: "DeviceGet(ordinal int) (Device, error)", Iface: driver},
	{Sym: "cuDeviceGetName", Params: "char *name, int len, CUdevice d",
		Method: "DeviceName(d Device) (string, error)", CustomGo: true, Iface: driver},
	{Sym: "cuDeviceGetUuid", Names: []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, Op: "cuDeviceGetUuid",
		Params: "unsigned char *uuid16, CUdevice d",
		Method: "DeviceUUID(d Device) ([16]byte, error)", CustomGo: true, Iface: driver},
	{Sym: "cuDeviceGetAttribute", Params: "int *v, int a, CUdevice d",
		Method: "DeviceAttribute(d Device, a Attribute) (int, error)", Iface: driver},
	{Sym: "cuDeviceTotalMem", Names: []string{"cuDeviceTotalMem_v2"}, Params: "size_t *bytes, CUdevice d",
		Method: "DeviceTotalMem(d Device) (uint64, error)", Iface: driver},

	{Sym: "cuDevicePrimaryCtxRetain", Params: "CUcontext *c, CUdevice d", Required: true,
		Method: "PrimaryCtxRetain(d Device) (Context, error)", Iface: driver},
	{Sym: "cuDevicePrimaryCtxRelease", Names: []string{"cuDevicePrimaryCtxRelease_v2"}, Params: "CUdevice d",
		Method: "PrimaryCtxRelease(d Device) error", Release: true, Iface: driver},
	// entry points added for fault
	{Sym: "cuDevicePrimaryCtxReset", Names: []string{"cuDevicePrimaryCtxReset_v2"}, Params: "CUdevice d",
		Method: "PrimaryCtxReset(d Device) error", Iface: driver,
		Doc: "PrimaryCtxReset destroys every allocation and all state of the device's\nprimary context (the way back from a sticky error); the retain count is\nunchanged."},
	{Sym: "cuCtxCreate4", Names: []string{"cuCtxCreate_v4"}, Params: "CUcontext *c, void *params, unsigned flags, CUdevice d"},
	{Sym: "cuCtxCreate2", Names: []string{"cuCtxCreate_v2"}, Params: "CUcontext *c, unsigned flags, CUdevice d"},
	{Sym: "cuCtxCreate", Names: []string{}, CustomC: "CUcontext *c, CUdevice d",
		Method: "CtxCreate(d Device) (Context, error)", Iface: baseline,
		Doc: "CtxCreate makes an ordinary (non-primary) context, the baseline a green\ncontext is measured against. It leaves no context current."},
	{Sym: "cuCtxDestroy", Names: []string{"cuCtxDestroy_v2"}, Params: "CUcontext c",
		Method: "CtxDestroy(c Context) error", Iface: baseline},
	{Sym: "cuCtxPushCurrent", Names: []string{"cuCtxPushCurrent_v2"}, Params: "CUcontext c", Required: true},
	{Sym: "cuCtxPopCurrent", Names: []string{"cuCtxPopCurrent_v2"}, Params: "CUcontext *c", Required: true},
	{Sym: "cuCtxSynchronize", Ctx: pushed, Method: "CtxSynchronize(c Context) error", Iface: baseline},

	{Sym: "cuMemAlloc", Names: []string{"cuMemAlloc_v2"}, Params: "CUdeviceptr *p, size_t n", Ctx: pushed, Required: true,
		Method: "MemAlloc(c Context, n uint64) (DevicePtr, error)", Iface: driver},
	{Sym: "cuMemFree", Names: []string{"cuMemFree_v2"}, Params: "CUdeviceptr p", Ctx: pushed, Required: true,
		Method: "MemFree(c Context, p DevicePtr) error", Release: true, Iface: driver},
	{Sym: "cuMemGetInfo", Names: []string{"cuMemGetInfo_v2"}, Params: "size_t *freeBytes, size_t *totalBytes", Ctx: pushed,
		Method: "MemGetInfo(c Context) (free, total uint64, err error)", Iface: driver},
	{Sym: "cuMemcpyHtoD", Names: []string{"cuMemcpyHtoD_v2"}, Params: "CUdeviceptr dst, const void *src, size_t n", Ctx: pushed,
		Method: "MemcpyHtoD(c Context, dst DevicePtr, src []byte) error", CustomGo: true, Iface: driver},
	{Sym: "cuMemcpyDtoH", Names: []string{"cuMemcpyDtoH_v2"}, Params: "void *dst, CUdeviceptr src, size_t n", Ctx: pushed,
		Method: "MemcpyDtoH(c Context, dst []byte, src DevicePtr) error", CustomGo: true, Iface: driver},

	{Sym: "cuModuleLoadData", Params: "CUmodule *m, const void *image", Ctx: pushed,
		Method: "ModuleLoadData(c Context, image []byte) (Module, error)", CustomGo: true, Iface: driver,
		Makes: "ObjModule", MakeSize: "len(image)"},
	{Sym: "cuModuleUnload", Params: "CUmodule m", Ctx: pushed,
		Method: "ModuleUnload(c Context, m Module) error", Release: true, Iface: driver, Unmakes: "ObjModule"},
	{Sym: "cuModuleGetFunction", Params: "CUfunction *f, CUmodule m, const char *name", Ctx: pushed,
		Method: "ModuleGetFunction(c Context, m Module, name string) (Function, error)", CustomGo: true, Iface: driver},
	{Sym: "cuLaunchKernel", Required: true, Ctx: pushedOrNone,
		Params:  "CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params, void **extra",
		CustomC: "CUcontext c, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s, unsigned char *argbuf, const uint32_t *offs, int nargs",
		Method:  "LaunchKernel(c Context, f Function, grid, block Dim3, sharedMem uint32, s Stream, args *Args) error", CustomGo: true, Iface: driver},

	{Sym: "cuStreamCreate", Params: "CUstream *s, unsigned flags", Ctx: pushed, Required: true,
		Method: "StreamCreate(c Context, flags uint32) (Stream, error)", Iface: driver, Makes: "ObjStream"},
	{Sym: "cuStreamDestroy", Names: []string{"cuStreamDestroy_v2"}, Params: "CUstream s", Ctx: pushed,
		Method: "StreamDestroy(c Context, s Stream) error", Release: true, Iface: driver, Unmakes: "ObjStream"},
	{Sym: "cuStreamSynchronize", Params: "CUstream s", Ctx: pushedOrNone,
		Method: "StreamSynchronize(c Context, s Stream) error", Iface: driver},
	{Sym: "cuStreamQuery", Params: "CUstream s", Ctx: pushedOrNone,
		Method: "StreamQuery(c Context, s Stream) error", Iface: driver,
		Doc: "StreamQuery is nil once s has finished its work, an *Error with\nErrorNotReady before; it never waits."},

	// entry points added for branch whole
	{Sym: "cuStreamWaitEvent", Params: "CUstream s, CUevent e, unsigned flags=0", Ctx: pushed,
		Method: "StreamWaitEvent(ctx Context, s Stream, e Event) error", Iface: driver},

	{Sym: "cuEventCreate", Params: "CUevent *e, unsigned flags", Ctx: pushed,
		Method: "EventCreate(c Context, flags uint32) (Event, error)", Iface: driver, Makes: "ObjEvent"},
	{Sym: "cuEventRecord", Params: "CUevent e, CUstream s", Ctx: pushed,
		Method: "EventRecord(c Context, e Event, s Stream) error", Iface: driver},
	{Sym: "cuEventSynchronize", Params: "CUevent e", Ctx: pushedOrNone,
		Method: "EventSynchronize(c Context, e Event) error", Iface: driver},
	{Sym: "cuEventElapsedTime", Names: []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, Op: "cuEventElapsedTime",
		Params: "float *ms, CUevent start, CUevent end", Ctx: pushed,
		Method: "EventElapsedMs(c Context, start, end Event) (float32, error)", Iface: driver},
	{Sym: "cuEventDestroy", Names: []string{"cuEventDestroy_v2"}, Params: "CUevent e", Ctx: pushed,
		Method: "EventDestroy(c Context, e Event) error", Release: true, Iface: driver, Unmakes: "ObjEvent"},
	// entry points added for share
	{Sym: "cuEventQuery", Params: "CUevent e", Ctx: pushedOrNone,
		Method: "EventQuery(c Context, e Event) error", Iface: driver,
		Doc: "EventQuery is nil once the GPU has reached e, an *Error with\nErrorNotReady before; it never waits."},

	{Sym: "cuDeviceGetDevResource", Params: "CUdevice d, CUdevResource *r, int t",
		Method: "DeviceGetDevResource(d Device, t ResourceType) (DevResource, error)", CustomGo: true, Iface: driver},
	{Sym: "cuDevSmResourceSplitByCount",
		Params:   "CUdevResource *result, unsigned *nbGroups, const CUdevResource *input, CUdevResource *remaining, unsigned flags, unsigned minCount",
		Method:   "DevSmResourceSplitByCount(input DevResource, flags, minCount uint32, maxGroups int) (groups []DevResource, remainder DevResource, n int, err error)",
		CustomGo: true, Iface: driver,
		Doc: "DevSmResourceSplitByCount is cuDevSmResourceSplitByCount. With\nmaxGroups 0 it only asks how many groups the driver would make (null\nresult array) and returns that count with no groups; otherwise it\nmakes at most maxGroups groups and returns them with the remainder."},
	{Sym: "cuDevResourceGenerateDesc", Params: "CUdevResourceDesc *desc, CUdevResource *res, unsigned n",
		Method: "DevResourceGenerateDesc(res []DevResource) (ResourceDesc, error)", CustomGo: true, Iface: driver},
	{Sym: "cuGreenCtxCreate", Params: "CUgreenCtx *g, CUdevResourceDesc desc, CUdevice d, unsigned flags",
		Method: "GreenCtxCreate(desc ResourceDesc, d Device, flags uint32) (GreenCtx, error)", Iface: driver, Makes: "ObjGreenCtx"},
	{Sym: "cuGreenCtxDestroy", Params: "CUgreenCtx g", Method: "GreenCtxDestroy(g GreenCtx) error", Release: true, Iface: driver,
		Unmakes: "ObjGreenCtx"},
	{Sym: "cuCtxFromGreenCtx", Params: "CUcontext *c, CUgreenCtx g",
		Method: "CtxFromGreenCtx(g GreenCtx) (Context, error)", Iface: driver},
	{Sym: "cuGreenCtxStreamCreate", Params: "CUstream *s, CUgreenCtx g, unsigned flags, int priority",
		Method: "GreenCtxStreamCreate(g GreenCtx, flags uint32, priority int) (Stream, error)", Iface: driver, Makes: "ObjStream"},
	{Sym: "cuGreenCtxGetDevResource", Params: "CUgreenCtx g, CUdevResource *r, int t",
		Method: "GreenCtxGetDevResource(g GreenCtx, t ResourceType) (DevResource, error)", CustomGo: true, Iface: driver},

	{Sym: "cuMemPoolCreate", Params: "CUmemoryPool *pool, const void *props", Ctx: pushed,
		CustomC: "CUcontext c, CUmemoryPool *pool, int d, size_t maxSize",
		Method:  "MemPoolCreate(c Context, d Device, maxSize uint64) (MemPool, error)", Iface: driver,
		Doc: "Stream-ordered pools. maxSize caps what the pool may hold from the\ndriver (0: the driver's default)."},
	{Sym: "cuMemPoolDestroy", Params: "CUmemoryPool p", Ctx: pushed,
		Method: "MemPoolDestroy(c Context, p MemPool) error", Release: true, Iface: driver},
	{Sym: "cuMemAllocFromPoolAsync", Params: "CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s", Ctx: pushedOrNone,
		Method: "MemAllocFromPoolAsync(c Context, n uint64, p MemPool, s Stream) (DevicePtr, error)", Iface: driver},
	{Sym: "cuMemFreeAsync", Params: "CUdeviceptr d, CUstream s", Ctx: pushedOrNone,
		Method: "MemFreeAsync(c Context, d DevicePtr, s Stream) error", Release: true, Iface: driver},
	{Sym: "cuMemPoolTrimTo", Params: "CUmemoryPool p, size_t keep", Ctx: pushed,
		Method: "MemPoolTrimTo(c Context, p MemPool, keep uint64) error", Iface: driver},
	{Sym: "cuMemPoolSetAttribute", Params: "CUmemoryPool p, int a, void *v", Ctx: pushed,
		Shim: "fcsp_cuMemPoolSetAttribute64", CustomC: "CUcontext c, CUmemoryPool p, int a, unsigned long long v",
		Method: "MemPoolSetAttribute(c Context, p MemPool, a PoolAttribute, v uint64) error", Iface: driver},
	{Sym: "cuMemPoolGetAttribute", Params: "CUmemoryPool p, int a, void *v", Ctx: pushed,
		Shim: "fcsp_cuMemPoolGetAttribute64", CustomC: "CUcontext c, CUmemoryPool p, int a, unsigned long long *v",
		Method: "MemPoolGetAttribute(c Context, p MemPool, a PoolAttribute) (uint64, error)", Iface: driver},

	// entry points added for lib: the current context of the calling thread
	// (fcsp's Tenant.Do, on a locked OS thread), stream capture and graphs,
	// memsets in stream order.
	{Sym: "cuCtxSetCurrent", Params: "CUcontext ctx", Method: "CtxSetCurrent(ctx Context) error", Iface: driver,
		Doc: "CtxSetCurrent and CtxGetCurrent act on the calling OS thread: only a\ncaller locked to its thread (runtime.LockOSThread) may rely on them."},
	{Sym: "cuCtxGetCurrent", Params: "CUcontext *c", Method: "CtxGetCurrent() (Context, error)", Iface: driver},
	{Sym: "cuStreamBeginCapture", Names: []string{"cuStreamBeginCapture_v2"}, Params: "CUstream s, int mode", Ctx: pushed,
		Method: "StreamBeginCapture(ctx Context, s Stream, mode int) error", Iface: driver},
	{Sym: "cuStreamEndCapture", Params: "CUstream s, CUgraph *g", Ctx: pushed,
		Method: "StreamEndCapture(ctx Context, s Stream) (Graph, error)", Iface: driver},
	{Sym: "cuGraphInstantiateWithFlags", Params: "CUgraphExec *e, CUgraph g, unsigned long long flags=0", Ctx: pushed,
		Method: "GraphInstantiate(ctx Context, g Graph) (GraphExec, error)", Iface: driver},
	{Sym: "cuGraphLaunch", Params: "CUgraphExec e, CUstream s", Ctx: pushedOrNone,
		Method: "GraphLaunch(ctx Context, e GraphExec, s Stream) error", Iface: driver},
	{Sym: "cuGraphExecDestroy", Params: "CUgraphExec e", Ctx: pushed,
		Method: "GraphExecDestroy(ctx Context, e GraphExec) error", Release: true, Iface: driver},
	{Sym: "cuGraphDestroy", Params: "CUgraph g", Ctx: pushed,
		Method: "GraphDestroy(ctx Context, g Graph) error", Release: true, Iface: driver},
	{Sym: "cuMemsetD16Async", Params: "CUdeviceptr p, unsigned short v, size_t n, CUstream s", Ctx: pushed,
		Method: "MemsetD16Async(ctx Context, p DevicePtr, v uint16, n uint64, s Stream) error", Iface: driver},
	{Sym: "cuMemsetD32Async", Params: "CUdeviceptr p, unsigned int v, size_t n, CUstream s", Ctx: pushed,
		Method: "MemsetD32Async(ctx Context, p DevicePtr, v uint32, n uint64, s Stream) error", Iface: driver},

	// entry points added for dofast: Do's context switch in one cgo call
	// instead of two (cuCtxGetCurrent, then cuCtxSetCurrent). A composite
	// of two entry points above, so no pointer of its own: its C body
	// (ctxswap.c) and Go method (ctxswap.go) are hand-written.
	{Method: "CtxSwapCurrent(ctx Context) (prev Context, thread int, err error)", CustomGo: true, Iface: driver,
		Doc: "CtxSwapCurrent makes ctx current on the calling OS thread and returns the\ncontext that was current before (cuCtxGetCurrent, then cuCtxSetCurrent\nunless they are the same), in one call; restore with CtxSetCurrent(prev).\nthread is the calling thread's id (gettid, kept per thread by the shim):\nTenant.Do needs it too, and learns it here without another call. Like\nCtxSetCurrent, only a caller locked to its thread may rely on it."},
}

// The interfaces' own comments; %s is the list of the methods whose rows
// say pushedOrNone.
const driverDoc = `Driver is the part of the CUDA driver API that the SDK's production code
calls. Calls that depend on a context take it explicitly; implementations
make it current for the duration of the call only. Every error is an
*Error wrapping a Result.

%s also accept a zero context, meaning "make none current: the stream (or
event) names it", so that a long wait need not hold a green context current
on one thread while other threads wait to use it. Whether the driver accepts
that is learned at run time (see fcsp), never assumed.`

const baselineDoc = `Baseline is what only tests, benchmarks and examples call: the ordinary
contexts a green context is measured against. The real library and the
fake implement it beside Driver; code that needs it asserts for it.`
