//go:build !cgo || !linux

// Package cublas is the example's run-time cuBLAS binding; without cgo on
// linux it only reports that cuBLAS cannot be loaded.
package cublas

import (
	"errors"
	"unsafe"
)

// Handle is a cublasHandle_t.
type Handle struct{}

var errNoCgo = errors.New("cublas: this build has no cgo on linux")

func Load(string) error                                  { return errNoCgo }
func LoadDefault(...string) (string, error)              { return "", errNoCgo }
func Create() (Handle, error)                            { return Handle{}, errNoCgo }
func (Handle) Destroy() error                            { return errNoCgo }
func (Handle) SetStream(unsafe.Pointer) error            { return errNoCgo }
func (Handle) SetSmCountTarget(int) error                { return errNoCgo }
func (Handle) SetWorkspace(unsafe.Pointer, uint64) error { return errNoCgo }
func (Handle) GemmBF16(int, int, int, uint64, uint64, uint64, float32, float32) error {
	return errNoCgo
}
