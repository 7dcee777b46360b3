//go:build cgo && linux

// The hand-written part of the shim: loading the library, and the wrappers
// whose bodies are more than push, call, pop (the table in gen marks them
// CustomC). zz_generated_shim.c holds the rest.
#include "shim_internal.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

void *fcsp_lib;

int fcsp_load(const char *path, char *err, int errlen) {
	if (fcsp_lib) return 0;
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	fcsp_resolve(lib);
	fcsp_lib = lib;
	if (!fcsp_p_cuInit) {
		snprintf(err, errlen, "%s has no cuInit", path);
		return -1;
	}
	CUresult r = fcsp_p_cuInit(0);
	if (r != 0) {
		snprintf(err, errlen, "cuInit");
		return r;
	}
	return 0;
}

CUresult fcsp_cuCtxCreate(CUcontext *c, CUdevice d) {
	if (!fcsp_lib) return FCSP_LIBRARY_MISSING;
	CUresult r;
	if (fcsp_p_cuCtxCreate4) r = fcsp_p_cuCtxCreate4(c, NULL, 0, d);
	else if (fcsp_p_cuCtxCreate2) r = fcsp_p_cuCtxCreate2(c, 0, d);
	else return FCSP_SYMBOL_MISSING;
	if (r != 0) return r;
	// cuCtxCreate leaves the new context current (pushed); undo that.
	CUcontext popped;
	return fcsp_p_cuCtxPopCurrent(&popped);
}

// The Go side passes the arguments packed in one buffer with their offsets
// (no Go pointers to Go pointers); the driver wants an array of pointers.
CUresult fcsp_cuLaunchKernel(CUcontext c, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                             unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
                             unsigned char *argbuf, const uint32_t *offs, int nargs) {
	GUARD(fcsp_p_cuLaunchKernel)
	void *params[64];
	if (nargs > 64) return 1; // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < nargs; i++) params[i] = argbuf + offs[i];
	if (!c) return fcsp_p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, nargs ? params : NULL, NULL);
	SCOPED(c, fcsp_p_cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, nargs ? params : NULL, NULL));
}

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

CUresult fcsp_cuMemPoolCreate(CUcontext c, CUmemoryPool *pool, int d, size_t maxSize) {
	GUARD(fcsp_p_cuMemPoolCreate)
	struct fcsp_pool_props props;
	memset(&props, 0, sizeof props);
	props.allocType = 1;  // CU_MEM_ALLOCATION_TYPE_PINNED
	props.locType = 1;    // CU_MEM_LOCATION_TYPE_DEVICE
	props.locId = d;
	props.maxSize = maxSize;
	SCOPED(c, fcsp_p_cuMemPoolCreate(pool, &props));
}

// The 64-bit pool attributes, by value in and by pointer out.
CUresult fcsp_cuMemPoolSetAttribute64(CUcontext c, CUmemoryPool p, int a, unsigned long long v) {
	GUARD(fcsp_p_cuMemPoolSetAttribute) SCOPED(c, fcsp_p_cuMemPoolSetAttribute(p, a, &v));
}
CUresult fcsp_cuMemPoolGetAttribute64(CUcontext c, CUmemoryPool p, int a, unsigned long long *v) {
	GUARD(fcsp_p_cuMemPoolGetAttribute) SCOPED(c, fcsp_p_cuMemPoolGetAttribute(p, a, v));
}
