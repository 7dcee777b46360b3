// entry points added for dofast (ctxswap.c). Hand-written.
#ifndef FCSP_CTXSWAP_H
#define FCSP_CTXSWAP_H
#include "shim_types.h"

// The outcome comes back by value, not through pointers: a cgo call with
// no pointer arguments skips the runtime's check of each (cgocheck), a
// tenth of Do's time against the mock driver.
typedef struct {
	CUcontext prev; // the context current before
	CUresult r;
	int set;        // r is cuCtxSetCurrent's (else cuCtxGetCurrent's)
	int thread;     // the calling OS thread's id
} fcsp_swap;

fcsp_swap fcsp_ctx_swap(CUcontext c);
#endif
