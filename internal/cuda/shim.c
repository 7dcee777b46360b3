//go:build cgo && linux

#include "shim.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void *lib;

// Each entry point is a typed pointer resolved once by fcsp_load.
#define ENTRY(sym, ret, params) typedef ret(*pfn_##sym) params; static pfn_##sym p_##sym;
ENTRY(cuInit, CUresult, (unsigned))
ENTRY(cuDriverGetVersion, CUresult, (int *))
ENTRY(cuDeviceGetCount, CUresult, (int *))
ENTRY(cuDeviceGet, CUresult, (CUdevice *, int))
ENTRY(cuDeviceGetName, CUresult, (char *, int, CUdevice))
ENTRY(cuDeviceGetUuid, CUresult, (unsigned char *, CUdevice))
ENTRY(cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))
ENTRY(cuDeviceTotalMem, CUresult, (size_t *, CUdevice))
ENTRY(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))
ENTRY(cuDevicePrimaryCtxRelease, CUresult, (CUdevice))
ENTRY(cuCtxCreate4, CUresult, (CUcontext *, void *, unsigned, CUdevice))
ENTRY(cuCtxCreate2, CUresult, (CUcontext *, unsigned, CUdevice))
ENTRY(cuCtxDestroy, CUresult, (CUcontext))
ENTRY(cuCtxPushCurrent, CUresult, (CUcontext))
ENTRY(cuCtxPopCurrent, CUresult, (CUcontext *))
ENTRY(cuCtxSynchronize, CUresult, (void))
ENTRY(cuMemAlloc, CUresult, (CUdeviceptr *, size_t))
ENTRY(cuMemFree, CUresult, (CUdeviceptr))
ENTRY(cuMemGetInfo, CUresult, (size_t *, size_t *))
ENTRY(cuMemcpyHtoD, CUresult, (CUdeviceptr, const void *, size_t))
ENTRY(cuMemcpyDtoH, CUresult, (void *, CUdeviceptr, size_t))
ENTRY(cuStreamCreate, CUresult, (CUstream *, unsigned))
ENTRY(cuStreamDestroy, CUresult, (CUstream))
ENTRY(cuStreamSynchronize, CUresult, (CUstream))
ENTRY(cuEventCreate, CUresult, (CUevent *, unsigned))
ENTRY(cuEventRecord, CUresult, (CUevent, CUstream))
ENTRY(cuEventSynchronize, CUresult, (CUevent))
ENTRY(cuEventElapsedTime, CUresult, (float *, CUevent, CUevent))
ENTRY(cuEventDestroy, CUresult, (CUevent))
ENTRY(cuModuleLoadData, CUresult, (CUmodule *, const void *))
ENTRY(cuModuleUnload, CUresult, (CUmodule))
ENTRY(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))
ENTRY(cuLaunchKernel, CUresult, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **))
ENTRY(cuDeviceGetDevResource, CUresult, (CUdevice, CUdevResource *, int))
ENTRY(cuDevSmResourceSplitByCount, CUresult, (CUdevResource *, unsigned *, const CUdevResource *, CUdevResource *, unsigned, unsigned))
ENTRY(cuDevResourceGenerateDesc, CUresult, (CUdevResourceDesc *, CUdevResource *, unsigned))
ENTRY(cuGreenCtxCreate, CUresult, (CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned))
ENTRY(cuGreenCtxDestroy, CUresult, (CUgreenCtx))
ENTRY(cuCtxFromGreenCtx, CUresult, (CUcontext *, CUgreenCtx))
ENTRY(cuGreenCtxStreamCreate, CUresult, (CUstream *, CUgreenCtx, unsigned, int))
ENTRY(cuGreenCtxGetDevResource, CUresult, (CUgreenCtx, CUdevResource *, int))
ENTRY(cuMemPoolCreate, CUresult, (CUmemoryPool *, const void *))
ENTRY(cuMemPoolDestroy, CUresult, (CUmemoryPool))
ENTRY(cuMemAllocFromPoolAsync, CUresult, (CUdeviceptr *, size_t, CUmemoryPool, CUstream))
ENTRY(cuMemFreeAsync, CUresult, (CUdeviceptr, CUstream))
ENTRY(cuMemPoolTrimTo, CUresult, (CUmemoryPool, size_t))
ENTRY(cuMemPoolSetAttribute, CUresult, (CUmemoryPool, int, void *))
ENTRY(cuMemPoolGetAttribute, CUresult, (CUmemoryPool, int, void *))
// entry points added for branch whole
ENTRY(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned))

static void *sym(const char *name) { return lib ? dlsym(lib, name) : NULL; }

int fcsp_load(const char *path, char *err, int errlen) {
	if (lib) return 0;
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	// Versioned names first: the unversioned ones are the legacy ABI.
	p_cuInit = (pfn_cuInit)sym("cuInit");
	p_cuDriverGetVersion = (pfn_cuDriverGetVersion)sym("cuDriverGetVersion");
	p_cuDeviceGetCount = (pfn_cuDeviceGetCount)sym("cuDeviceGetCount");
	p_cuDeviceGet = (pfn_cuDeviceGet)sym("cuDeviceGet");
	p_cuDeviceGetName = (pfn_cuDeviceGetName)sym("cuDeviceGetName");
	p_cuDeviceGetUuid = (pfn_cuDeviceGetUuid)sym("cuDeviceGetUuid_v2");
	if (!p_cuDeviceGetUuid) p_cuDeviceGetUuid = (pfn_cuDeviceGetUuid)sym("cuDeviceGetUuid");
	p_cuDeviceGetAttribute = (pfn_cuDeviceGetAttribute)sym("cuDeviceGetAttribute");
	p_cuDeviceTotalMem = (pfn_cuDeviceTotalMem)sym("cuDeviceTotalMem_v2");
	p_cuDevicePrimaryCtxRetain = (pfn_cuDevicePrimaryCtxRetain)sym("cuDevicePrimaryCtxRetain");
	p_cuDevicePrimaryCtxRelease = (pfn_cuDevicePrimaryCtxRelease)sym("cuDevicePrimaryCtxRelease_v2");
	p_cuCtxCreate4 = (pfn_cuCtxCreate4)sym("cuCtxCreate_v4");
	p_cuCtxCreate2 = (pfn_cuCtxCreate2)sym("cuCtxCreate_v2");
	p_cuCtxDestroy = (pfn_cuCtxDestroy)sym("cuCtxDestroy_v2");
	p_cuCtxPushCurrent = (pfn_cuCtxPushCurrent)sym("cuCtxPushCurrent_v2");
	p_cuCtxPopCurrent = (pfn_cuCtxPopCurrent)sym("cuCtxPopCurrent_v2");
	p_cuCtxSynchronize = (pfn_cuCtxSynchronize)sym("cuCtxSynchronize");
	p_cuMemAlloc = (pfn_cuMemAlloc)sym("cuMemAlloc_v2");
	p_cuMemFree = (pfn_cuMemFree)sym("cuMemFree_v2");
	p_cuMemGetInfo = (pfn_cuMemGetInfo)sym("cuMemGetInfo_v2");
	p_cuMemcpyHtoD = (pfn_cuMemcpyHtoD)sym("cuMemcpyHtoD_v2");
	p_cuMemcpyDtoH = (pfn_cuMemcpyDtoH)sym("cuMemcpyDtoH_v2");
	p_cuStreamCreate = (pfn_cuStreamCreate)sym("cuStreamCreate");
	p_cuStreamDestroy = (pfn_cuStreamDestroy)sym("cuStreamDestroy_v2");
	p_cuStreamSynchronize = (pfn_cuStreamSynchronize)sym("cuStreamSynchronize");
	p_cuEventCreate = (pfn_cuEventCreate)sym("cuEventCreate");
	p_cuEventRecord = (pfn_cuEventRecord)sym("cuEventRecord");
	p_cuEventSynchronize = (pfn_cuEventSynchronize)sym("cuEventSynchronize");
	p_cuEventElapsedTime = (pfn_cuEventElapsedTime)sym("cuEventElapsedTime_v2");
	if (!p_cuEventElapsedTime) p_cuEventElapsedTime = (pfn_cuEventElapsedTime)sym("cuEventElapsedTime");
	p_cuEventDestroy = (pfn_cuEventDestroy)sym("cuEventDestroy_v2");
	p_cuModuleLoadData = (pfn_cuModuleLoadData)sym("cuModuleLoadData");
	p_cuModuleUnload = (pfn_cuModuleUnload)sym("cuModuleUnload");
	p_cuModuleGetFunction = (pfn_cuModuleGetFunction)sym("cuModuleGetFunction");
	p_cuLaunchKernel = (pfn_cuLaunchKernel)sym("cuLaunchKernel");
	p_cuDeviceGetDevResource = (pfn_cuDeviceGetDevResource)sym("cuDeviceGetDevResource");
	p_cuDevSmResourceSplitByCount = (pfn_cuDevSmResourceSplitByCount)sym("cuDevSmResourceSplitByCount");
	p_cuDevResourceGenerateDesc = (pfn_cuDevResourceGenerateDesc)sym("cuDevResourceGenerateDesc");
	p_cuGreenCtxCreate = (pfn_cuGreenCtxCreate)sym("cuGreenCtxCreate");
	p_cuGreenCtxDestroy = (pfn_cuGreenCtxDestroy)sym("cuGreenCtxDestroy");
	p_cuCtxFromGreenCtx = (pfn_cuCtxFromGreenCtx)sym("cuCtxFromGreenCtx");
	p_cuGreenCtxStreamCreate = (pfn_cuGreenCtxStreamCreate)sym("cuGreenCtxStreamCreate");
	p_cuGreenCtxGetDevResource = (pfn_cuGreenCtxGetDevResource)sym("cuGreenCtxGetDevResource");
	p_cuMemPoolCreate = (pfn_cuMemPoolCreate)sym("cuMemPoolCreate");
	p_cuMemPoolDestroy = (pfn_cuMemPoolDestroy)sym("cuMemPoolDestroy");
	p_cuMemAllocFromPoolAsync = (pfn_cuMemAllocFromPoolAsync)sym("cuMemAllocFromPoolAsync");
	p_cuMemFreeAsync = (pfn_cuMemFreeAsync)sym("cuMemFreeAsync");
	p_cuMemPoolTrimTo = (pfn_cuMemPoolTrimTo)sym("cuMemPoolTrimTo");
	p_cuMemPoolSetAttribute = (pfn_cuMemPoolSetAttribute)sym("cuMemPoolSetAttribute");
	p_cuMemPoolGetAttribute = (pfn_cuMemPoolGetAttribute)sym("cuMemPoolGetAttribute");
	// entry points added for branch whole
	p_cuStreamWaitEvent = (pfn_cuStreamWaitEvent)sym("cuStreamWaitEvent");
	if (!p_cuInit) {
		snprintf(err, errlen, "%s has no cuInit", path);
		return -1;
	}
	CUresult r = p_cuInit(0);
	if (r != 0) {
		snprintf(err, errlen, "cuInit");
		return r;
	}
	return 0;
}

// Names the required entry points that are missing (green contexts are optional).
int fcsp_missing_required(char *names, int len) {
	int missing = 0;
	names[0] = 0;
#define REQ(p, n) if (!p) { missing++; strncat(names, n " ", len - strlen(names) - 1); }
	REQ(p_cuDriverGetVersion, "cuDriverGetVersion") REQ(p_cuDeviceGet, "cuDeviceGet")
	REQ(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") REQ(p_cuCtxPushCurrent, "cuCtxPushCurrent_v2")
	REQ(p_cuCtxPopCurrent, "cuCtxPopCurrent_v2") REQ(p_cuMemAlloc, "cuMemAlloc_v2") REQ(p_cuMemFree, "cuMemFree_v2")
	REQ(p_cuLaunchKernel, "cuLaunchKernel") REQ(p_cuStreamCreate, "cuStreamCreate")
#undef REQ
	return missing;
}

#define GUARD(p) if (!lib) return FCSP_LIBRARY_MISSING; if (!p) return FCSP_SYMBOL_MISSING;

// Scoped calls: push the caller's context, call, pop it, all on this thread
// inside one cgo call, so the goroutine's thread never keeps it current.
#define SCOPED(ctx, call) do { \
	CUresult r_ = p_cuCtxPushCurrent(ctx); \
	if (r_ != 0) return r_; \
	r_ = (call); \
	CUcontext popped_; \
	CUresult rp_ = p_cuCtxPopCurrent(&popped_); \
	return r_ != 0 ? r_ : rp_; \
} while (0)

CUresult fcsp_cuDriverGetVersion(int *v) { GUARD(p_cuDriverGetVersion) return p_cuDriverGetVersion(v); }
CUresult fcsp_cuDeviceGetCount(int *n) { GUARD(p_cuDeviceGetCount) return p_cuDeviceGetCount(n); }
CUresult fcsp_cuDeviceGet(CUdevice *d, int o) { GUARD(p_cuDeviceGet) return p_cuDeviceGet(d, o); }
CUresult fcsp_cuDeviceGetName(char *name, int len, CUdevice d) { GUARD(p_cuDeviceGetName) return p_cuDeviceGetName(name, len, d); }
CUresult fcsp_cuDeviceGetUuid(unsigned char *u, CUdevice d) { GUARD(p_cuDeviceGetUuid) return p_cuDeviceGetUuid(u, d); }
CUresult fcsp_cuDeviceGetAttribute(int *v, int a, CUdevice d) { GUARD(p_cuDeviceGetAttribute) return p_cuDeviceGetAttribute(v, a, d); }
CUresult fcsp_cuDeviceTotalMem(size_t *b, CUdevice d) { GUARD(p_cuDeviceTotalMem) return p_cuDeviceTotalMem(b, d); }
CUresult fcsp_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { GUARD(p_cuDevicePrimaryCtxRetain) return p_cuDevicePrimaryCtxRetain(c, d); }
CUresult fcsp_cuDevicePrimaryCtxRelease(CUdevice d) { GUARD(p_cuDevicePrimaryCtxRelease) return p_cuDevicePrimaryCtxRelease(d); }

CUresult fcsp_cuCtxCreate(CUcontext *c, CUdevice d) {
	if (!lib) return FCSP_LIBRARY_MISSING;
	CUresult r;
	if (p_cuCtxCreate4) r = p_cuCtxCreate4(c, NULL, 0, d);
	else if (p_cuCtxCreate2) r = p_cuCtxCreate2(c, 0, d);
	else return FCSP_SYMBOL_MISSING;
	if (r != 0) return r;
	// cuCtxCreate leaves the new context current (pushed); undo that.
	CUcontext popped;
	return p_cuCtxPopCurrent(&popped);
}
CUresult fcsp_cuCtxDestroy(CUcontext c) { GUARD(p_cuCtxDestroy) return p_cuCtxDestroy(c); }
CUresult fcsp_cuCtxSynchronize(CUcontext c) { GUARD(p_cuCtxSynchronize) SCOPED(c, p_cuCtxSynchronize()); }
CUresult fcsp_cuMemAlloc(CUcontext c, CUdeviceptr *p, size_t n) { GUARD(p_cuMemAlloc) SCOPED(c, p_cuMemAlloc(p, n)); }
CUresult fcsp_cuMemFree(CUcontext c, CUdeviceptr p) { GUARD(p_cuMemFree) SCOPED(c, p_cuMemFree(p)); }
CUresult fcsp_cuMemGetInfo(CUcontext c, size_t *f, size_t *t) { GUARD(p_cuMemGetInfo) SCOPED(c, p_cuMemGetInfo(f, t)); }
CUresult fcsp_cuMemcpyHtoD(CUcontext c, CUdeviceptr d, const void *s, size_t n) { GUARD(p_cuMemcpyHtoD) SCOPED(c, p_cuMemcpyHtoD(d, s, n)); }
CUresult fcsp_cuMemcpyDtoH(CUcontext c, void *d, CUdeviceptr s, size_t n) { GUARD(p_cuMemcpyDtoH) SCOPED(c, p_cuMemcpyDtoH(d, s, n)); }
CUresult fcsp_cuStreamCreate(CUcontext c, CUstream *s, unsigned f) { GUARD(p_cuStreamCreate) SCOPED(c, p_cuStreamCreate(s, f)); }
CUresult fcsp_cuStreamDestroy(CUcontext c, CUstream s) { GUARD(p_cuStreamDestroy) SCOPED(c, p_cuStreamDestroy(s)); }
CUresult fcsp_cuStreamSynchronize(CUcontext c, CUstream s) {
	GUARD(p_cuStreamSynchronize)
	if (!c) return p_cuStreamSynchronize(s); // unscoped: the stream names its context
	SCOPED(c, p_cuStreamSynchronize(s));
}
CUresult fcsp_cuEventCreate(CUcontext c, CUevent *e, unsigned f) { GUARD(p_cuEventCreate) SCOPED(c, p_cuEventCreate(e, f)); }
CUresult fcsp_cuEventRecord(CUcontext c, CUevent e, CUstream s) { GUARD(p_cuEventRecord) SCOPED(c, p_cuEventRecord(e, s)); }
CUresult fcsp_cuEventSynchronize(CUcontext c, CUevent e) {
	GUARD(p_cuEventSynchronize)
	if (!c) return p_cuEventSynchronize(e);
	SCOPED(c, p_cuEventSynchronize(e));
}
CUresult fcsp_cuEventElapsedTime(CUcontext c, float *ms, CUevent a, CUevent b) { GUARD(p_cuEventElapsedTime) SCOPED(c, p_cuEventElapsedTime(ms, a, b)); }
CUresult fcsp_cuEventDestroy(CUcontext c, CUevent e) { GUARD(p_cuEventDestroy) SCOPED(c, p_cuEventDestroy(e)); }
CUresult fcsp_cuModuleLoadData(CUcontext c, CUmodule *m, const void *img) { GUARD(p_cuModuleLoadData) SCOPED(c, p_cuModuleLoadData(m, img)); }
CUresult fcsp_cuModuleUnload(CUcontext c, CUmodule m) { GUARD(p_cuModuleUnload) SCOPED(c, p_cuModuleUnload(m)); }
CUresult fcsp_cuModuleGetFunction(CUcontext c, CUfunction *f, CUmodule m, const char *n) { GUARD(p_cuModuleGetFunction) SCOPED(c, p_cuModuleGetFunction(f, m, n)); }

CUresult fcsp_cuLaunchKernel(CUcontext c, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                             unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
                             unsigned char *argbuf, const uint32_t *offs, int nargs) {
	GUARD(p_cuLaunchKernel)
	void *params[64];
	if (nargs > 64) return 1; // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < nargs; i++) params[i] = argbuf + offs[i];
	if (!c) return p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, nargs ? params : NULL, NULL);
	SCOPED(c, p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, nargs ? params : NULL, NULL));
}

CUresult fcsp_cuDeviceGetDevResource(CUdevice d, CUdevResource *r, int t) { GUARD(p_cuDeviceGetDevResource) return p_cuDeviceGetDevResource(d, r, t); }
CUresult fcsp_cuDevSmResourceSplitByCount(CUdevResource *res, unsigned *n, const CUdevResource *in, CUdevResource *rem, unsigned fl, unsigned mc) {
	GUARD(p_cuDevSmResourceSplitByCount) return p_cuDevSmResourceSplitByCount(res, n, in, rem, fl, mc);
}
CUresult fcsp_cuDevResourceGenerateDesc(CUdevResourceDesc *d, CUdevResource *r, unsigned n) { GUARD(p_cuDevResourceGenerateDesc) return p_cuDevResourceGenerateDesc(d, r, n); }
CUresult fcsp_cuGreenCtxCreate(CUgreenCtx *g, CUdevResourceDesc d, CUdevice dev, unsigned f) { GUARD(p_cuGreenCtxCreate) return p_cuGreenCtxCreate(g, d, dev, f); }
CUresult fcsp_cuGreenCtxDestroy(CUgreenCtx g) { GUARD(p_cuGreenCtxDestroy) return p_cuGreenCtxDestroy(g); }
CUresult fcsp_cuCtxFromGreenCtx(CUcontext *c, CUgreenCtx g) { GUARD(p_cuCtxFromGreenCtx) return p_cuCtxFromGreenCtx(c, g); }
CUresult fcsp_cuGreenCtxStreamCreate(CUstream *s, CUgreenCtx g, unsigned f, int p) { GUARD(p_cuGreenCtxStreamCreate) return p_cuGreenCtxStreamCreate(s, g, f, p); }
CUresult fcsp_cuGreenCtxGetDevResource(CUgreenCtx g, CUdevResource *r, int t) { GUARD(p_cuGreenCtxGetDevResource) return p_cuGreenCtxGetDevResource(g, r, t); }

// CUmemPoolProps as of CUDA 12.2+: allocType, handleTypes, location {type,
// id}, win32SecurityAttributes, maxSize, usage, reserved. Zeroed padding
// past what we set keeps it valid whatever the reserved tail's length.
struct fcsp_pool_props {
	int allocType;
	int handleTypes;
	int locType;
	int locId;
	void *win32;
	size_t maxSize;
	unsigned char tail[192];
};

CUresult fcsp_cuMemPoolCreate(CUcontext c, CUmemoryPool *pool, int device, size_t maxSize) {
	GUARD(p_cuMemPoolCreate)
	struct fcsp_pool_props props;
	memset(&props, 0, sizeof props);
	props.allocType = 1;  // CU_MEM_ALLOCATION_TYPE_PINNED
	props.locType = 1;    // CU_MEM_LOCATION_TYPE_DEVICE
	props.locId = device;
	props.maxSize = maxSize;
	SCOPED(c, p_cuMemPoolCreate(pool, &props));
}
CUresult fcsp_cuMemPoolDestroy(CUcontext c, CUmemoryPool pool) { GUARD(p_cuMemPoolDestroy) SCOPED(c, p_cuMemPoolDestroy(pool)); }
CUresult fcsp_cuMemAllocFromPoolAsync(CUcontext c, CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s) {
	GUARD(p_cuMemAllocFromPoolAsync)
	if (!c) return p_cuMemAllocFromPoolAsync(p, n, pool, s); // unscoped: the stream names the context
	SCOPED(c, p_cuMemAllocFromPoolAsync(p, n, pool, s));
}
CUresult fcsp_cuMemFreeAsync(CUcontext c, CUdeviceptr p, CUstream s) {
	GUARD(p_cuMemFreeAsync)
	if (!c) return p_cuMemFreeAsync(p, s);
	SCOPED(c, p_cuMemFreeAsync(p, s));
}
CUresult fcsp_cuMemPoolTrimTo(CUcontext c, CUmemoryPool pool, size_t keep) { GUARD(p_cuMemPoolTrimTo) SCOPED(c, p_cuMemPoolTrimTo(pool, keep)); }
CUresult fcsp_cuMemPoolSetAttribute64(CUcontext c, CUmemoryPool pool, int attr, unsigned long long v) {
	GUARD(p_cuMemPoolSetAttribute) SCOPED(c, p_cuMemPoolSetAttribute(pool, attr, &v));
}
CUresult fcsp_cuMemPoolGetAttribute64(CUcontext c, CUmemoryPool pool, int attr, unsigned long long *v) {
	GUARD(p_cuMemPoolGetAttribute) SCOPED(c, p_cuMemPoolGetAttribute(pool, attr, v));
}

// entry points added for branch whole
CUresult fcsp_cuStreamWaitEvent(CUcontext c, CUstream s, CUevent e) {
	GUARD(p_cuStreamWaitEvent)
	if (!c) return p_cuStreamWaitEvent(s, e, 0); // unscoped: the stream names the context
	SCOPED(c, p_cuStreamWaitEvent(s, e, 0));
}
