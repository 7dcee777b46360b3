// A minimal, header-free view of the CUDA driver API: only the types this
// package passes, so that nothing CUDA is needed to build. Hand-written; the
// entry points themselves are generated (shim.h, shim_entries.h).
#ifndef FCSP_SHIM_TYPES_H
#define FCSP_SHIM_TYPES_H
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUgreenCtx, *CUstream, *CUevent, *CUmodule, *CUfunction, *CUdevResourceDesc, *CUmemoryPool;
typedef void *CUgraph, *CUgraphExec; // entry points added for lib
typedef unsigned long long CUdeviceptr;
typedef struct { unsigned char b[144]; } CUdevResource;

#define FCSP_SYMBOL_MISSING 0x7fff0001
#define FCSP_LIBRARY_MISSING 0x7fff0002

int fcsp_load(const char *path, char *err, int errlen);
#endif
