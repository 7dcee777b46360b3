// A minimal, header-free view of the CUDA driver API: only the types and
// entry points this package calls, resolved with dlopen/dlsym at run time so
// that nothing CUDA is needed to build.
#ifndef FCSP_SHIM_H
#define FCSP_SHIM_H
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUgreenCtx, *CUstream, *CUevent, *CUmodule, *CUfunction, *CUdevResourceDesc, *CUmemoryPool;
typedef unsigned long long CUdeviceptr;
typedef struct { unsigned char b[144]; } CUdevResource;

#define FCSP_SYMBOL_MISSING 0x7fff0001
#define FCSP_LIBRARY_MISSING 0x7fff0002

int fcsp_load(const char *path, char *err, int errlen);
int fcsp_missing_required(char *names, int len);

CUresult fcsp_cuDriverGetVersion(int *v);
CUresult fcsp_cuDeviceGetCount(int *n);
CUresult fcsp_cuDeviceGet(CUdevice *d, int ordinal);
CUresult fcsp_cuDeviceGetName(char *name, int len, CUdevice d);
CUresult fcsp_cuDeviceGetUuid(unsigned char *uuid16, CUdevice d);
CUresult fcsp_cuDeviceGetAttribute(int *v, int attr, CUdevice d);
CUresult fcsp_cuDeviceTotalMem(size_t *bytes, CUdevice d);
CUresult fcsp_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult fcsp_cuDevicePrimaryCtxRelease(CUdevice d);
CUresult fcsp_cuCtxCreate(CUcontext *c, CUdevice d);
CUresult fcsp_cuCtxDestroy(CUcontext c);
CUresult fcsp_cuCtxSynchronize(CUcontext c);
CUresult fcsp_cuMemAlloc(CUcontext c, CUdeviceptr *p, size_t n);
CUresult fcsp_cuMemFree(CUcontext c, CUdeviceptr p);
CUresult fcsp_cuMemGetInfo(CUcontext c, size_t *free, size_t *total);
CUresult fcsp_cuMemcpyHtoD(CUcontext c, CUdeviceptr dst, const void *src, size_t n);
CUresult fcsp_cuMemcpyDtoH(CUcontext c, void *dst, CUdeviceptr src, size_t n);
CUresult fcsp_cuStreamCreate(CUcontext c, CUstream *s, unsigned flags);
CUresult fcsp_cuStreamDestroy(CUcontext c, CUstream s);
CUresult fcsp_cuStreamSynchronize(CUcontext c, CUstream s);
CUresult fcsp_cuEventCreate(CUcontext c, CUevent *e, unsigned flags);
CUresult fcsp_cuEventRecord(CUcontext c, CUevent e, CUstream s);
CUresult fcsp_cuEventSynchronize(CUcontext c, CUevent e);
CUresult fcsp_cuEventElapsedTime(CUcontext c, float *ms, CUevent a, CUevent b);
CUresult fcsp_cuEventDestroy(CUcontext c, CUevent e);
CUresult fcsp_cuModuleLoadData(CUcontext c, CUmodule *m, const void *image);
CUresult fcsp_cuModuleUnload(CUcontext c, CUmodule m);
CUresult fcsp_cuModuleGetFunction(CUcontext c, CUfunction *f, CUmodule m, const char *name);
CUresult fcsp_cuLaunchKernel(CUcontext c, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                             unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
                             unsigned char *argbuf, const uint32_t *offs, int nargs);
CUresult fcsp_cuDeviceGetDevResource(CUdevice d, CUdevResource *r, int type);
CUresult fcsp_cuDevSmResourceSplitByCount(CUdevResource *result, unsigned *nbGroups, const CUdevResource *input,
                                          CUdevResource *remaining, unsigned flags, unsigned minCount);
CUresult fcsp_cuDevResourceGenerateDesc(CUdevResourceDesc *desc, CUdevResource *res, unsigned n);
CUresult fcsp_cuGreenCtxCreate(CUgreenCtx *g, CUdevResourceDesc desc, CUdevice d, unsigned flags);
CUresult fcsp_cuGreenCtxDestroy(CUgreenCtx g);
CUresult fcsp_cuCtxFromGreenCtx(CUcontext *c, CUgreenCtx g);
CUresult fcsp_cuGreenCtxStreamCreate(CUstream *s, CUgreenCtx g, unsigned flags, int priority);
CUresult fcsp_cuGreenCtxGetDevResource(CUgreenCtx g, CUdevResource *r, int type);
CUresult fcsp_cuMemPoolCreate(CUcontext c, CUmemoryPool *pool, int device, size_t maxSize);
CUresult fcsp_cuMemPoolDestroy(CUcontext c, CUmemoryPool pool);
CUresult fcsp_cuMemAllocFromPoolAsync(CUcontext c, CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s);
CUresult fcsp_cuMemFreeAsync(CUcontext c, CUdeviceptr p, CUstream s);
CUresult fcsp_cuMemPoolTrimTo(CUcontext c, CUmemoryPool pool, size_t keep);
CUresult fcsp_cuMemPoolSetAttribute64(CUcontext c, CUmemoryPool pool, int attr, unsigned long long v);
CUresult fcsp_cuMemPoolGetAttribute64(CUcontext c, CUmemoryPool pool, int attr, unsigned long long *v);
// entry points added for branch whole
CUresult fcsp_cuStreamWaitEvent(CUcontext c, CUstream s, CUevent e);
#endif
