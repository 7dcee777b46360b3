//go:build cgo && linux

package fcsp

import "github.com/fcsp-go/fcsp-go/internal/cuda"

func (d cgoCurrent) CtxSwapCurrent(c cuda.Context) (cuda.Context, int, error) {
	return d.lib.CtxSwapCurrent(c)
}
