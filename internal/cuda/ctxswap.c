//go:build cgo && linux

// entry points added for dofast: a composite of cuCtxGetCurrent and
// cuCtxSetCurrent, hand-written because it is two driver calls in one cgo
// call (Tenant.Do's context switch: one crossing fewer on every Do). *set
// says whether the failure, if any, was cuCtxSetCurrent's.
#include "shim_internal.h"

CUresult fcsp_ctx_swap(CUcontext c, CUcontext *prev, int *set) {
	*set = 0;
	GUARD(fcsp_p_cuCtxGetCurrent)
	CUresult r = fcsp_p_cuCtxGetCurrent(prev);
	if (r != 0 || *prev == c) return r;
	*set = 1;
	if (!fcsp_p_cuCtxSetCurrent) return FCSP_SYMBOL_MISSING;
	return fcsp_p_cuCtxSetCurrent(c);
}
