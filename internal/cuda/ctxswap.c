//go:build cgo && linux

// entry points added for dofast: a composite of cuCtxGetCurrent and
// cuCtxSetCurrent, hand-written because it is two driver calls in one cgo
// call (Tenant.Do's context switch: one crossing fewer on every Do). It
// also says which thread it ran on, which Do needs as well: gettid is a
// system call, so the id is kept per thread after the first.
#include <sys/syscall.h>
#include <unistd.h>
#include "ctxswap.h"
#include "shim_internal.h"

static __thread int fcsp_tid; // zero at each thread's start; a thread's id never changes

fcsp_swap fcsp_ctx_swap(CUcontext c) {
	fcsp_swap s = {0};
	if (!fcsp_tid) fcsp_tid = (int)syscall(SYS_gettid);
	s.thread = fcsp_tid;
	if (!fcsp_lib) { s.r = FCSP_LIBRARY_MISSING; return s; }
	if (!fcsp_p_cuCtxGetCurrent || !fcsp_p_cuCtxSetCurrent) { s.r = FCSP_SYMBOL_MISSING; return s; }
	s.r = fcsp_p_cuCtxGetCurrent(&s.prev);
	if (s.r != 0 || s.prev == c) return s;
	s.set = 1;
	s.r = fcsp_p_cuCtxSetCurrent(c);
	return s;
}
