//go:build cgo && linux

package cuda

// entry points added for dofast.

/*
#include "shim.h"
CUresult fcsp_ctx_swap(CUcontext c, CUcontext *prev, int *set);
// As the generated shims: the outputs are written during the call only and
// the helper never calls back into Go, so they need no heap allocation.
#cgo noescape fcsp_ctx_swap
#cgo nocallback fcsp_ctx_swap
*/
import "C"

import "unsafe"

// CtxSwapCurrent is cuCtxGetCurrent, then cuCtxSetCurrent(ctx) where they
// differ, in one cgo call (ctxswap.c).
func (l *Library) CtxSwapCurrent(ctx Context) (Context, error) {
	var prev C.CUcontext
	var set C.int
	if rc := Result(C.fcsp_ctx_swap(cctx(ctx), &prev, &set)); rc != Success {
		if set != 0 {
			return 0, check("cuCtxSetCurrent", rc)
		}
		return 0, check("cuCtxGetCurrent", rc)
	}
	return Context(unsafe.Pointer(prev)), nil
}
