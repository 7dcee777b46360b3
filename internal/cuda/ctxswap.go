//go:build cgo && linux

package cuda

// entry points added for dofast.

/*
#include "ctxswap.h"
#cgo nocallback fcsp_ctx_swap
*/
import "C"

import "unsafe"

// CtxSwapCurrent is cuCtxGetCurrent, then cuCtxSetCurrent(ctx) where they
// differ, and the thread's id, in one cgo call (ctxswap.c).
func (l *Library) CtxSwapCurrent(ctx Context) (prev Context, thread int, err error) {
	s := C.fcsp_ctx_swap(cctx(ctx))
	if rc := Result(s.r); rc != Success {
		if s.set != 0 {
			return 0, 0, check("cuCtxSetCurrent", rc)
		}
		return 0, 0, check("cuCtxGetCurrent", rc)
	}
	return Context(unsafe.Pointer(s.prev)), int(s.thread), nil
}
