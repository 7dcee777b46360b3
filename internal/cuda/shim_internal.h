// What the shim's C files share: the resolved entry points and the two
// macros every wrapper is made of. Hand-written.
#ifndef FCSP_SHIM_INTERNAL_H
#define FCSP_SHIM_INTERNAL_H
#include "shim.h"
#include "shim_entries.h"

extern void *fcsp_lib; // the dlopen handle; null until fcsp_load succeeds

#define GUARD(p) if (!fcsp_lib) return FCSP_LIBRARY_MISSING; if (!p) return FCSP_SYMBOL_MISSING;

// Scoped calls: push the caller's context, call, pop it, all on this thread
// inside one cgo call, so the goroutine's thread never keeps it current.
#define SCOPED(ctx, call) do { \
	CUresult r_ = fcsp_p_cuCtxPushCurrent(ctx); \
	if (r_ != 0) return r_; \
	r_ = (call); \
	CUcontext popped_; \
	CUresult rp_ = fcsp_p_cuCtxPopCurrent(&popped_); \
	return r_ != 0 ? r_ : rp_; \
} while (0)
#endif
