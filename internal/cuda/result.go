package cuda

import (
	"errors"
	"fmt"
)

// Result is a CUresult. It implements error, so a Result can be compared
// with errors.Is against the constants below.
type Result int32

// The CUresult values the SDK names. The numbers are the driver's ABI.
const (
	Success                    Result = 0
	ErrorInvalidValue          Result = 1
	ErrorOutOfMemory           Result = 2
	ErrorNotInitialized        Result = 3
	ErrorDeinitialized         Result = 4
	ErrorNoDevice              Result = 100
	ErrorInvalidDevice         Result = 101
	ErrorDeviceNotLicensed     Result = 102
	ErrorInvalidImage          Result = 200
	ErrorInvalidContext        Result = 201
	ErrorContextAlreadyCurrent Result = 202
	ErrorNoBinaryForGPU        Result = 209
	ErrorInvalidPTX            Result = 218
	ErrorInvalidSource         Result = 300
	ErrorFileNotFound          Result = 301
	ErrorInvalidHandle         Result = 400
	ErrorIllegalState          Result = 401
	ErrorNotFound              Result = 500
	ErrorNotReady              Result = 600
	ErrorIllegalAddress        Result = 700
	ErrorLaunchOutOfResources  Result = 701
	ErrorLaunchTimeout         Result = 702
	ErrorContextIsDestroyed    Result = 709
	ErrorAssert                Result = 710
	ErrorHardwareStackError    Result = 714
	ErrorIllegalInstruction    Result = 715
	ErrorMisalignedAddress     Result = 716
	ErrorInvalidAddressSpace   Result = 717
	ErrorInvalidPC             Result = 718
	ErrorLaunchFailed          Result = 719
	ErrorNotPermitted          Result = 800
	ErrorNotSupported          Result = 801
	ErrorInvalidResourceType   Result = 914
	ErrorInvalidResourceConfig Result = 915
	ErrorStreamDetached        Result = 917
	ErrorUnknown               Result = 999

	// entry points added for lib: stream capture.
	ErrorStreamCaptureUnsupported Result = 900
	ErrorStreamCaptureInvalidated Result = 901
	ErrorStreamCaptureUnmatched   Result = 903
	ErrorStreamCaptureWrongThread Result = 908
	errorSymbolMissing            Result = 0x7fff0001 // shim: entry point absent from this driver
	errorLibraryMissing           Result = 0x7fff0002 // shim: libcuda.so.1 not loaded
)

var resultNames = map[Result]string{
	Success:                    "CUDA_SUCCESS",
	ErrorInvalidValue:          "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory:           "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNotInitialized:        "CUDA_ERROR_NOT_INITIALIZED",
	ErrorDeinitialized:         "CUDA_ERROR_DEINITIALIZED",
	ErrorNoDevice:              "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidDevice:         "CUDA_ERROR_INVALID_DEVICE",
	ErrorDeviceNotLicensed:     "CUDA_ERROR_DEVICE_NOT_LICENSED",
	ErrorInvalidImage:          "CUDA_ERROR_INVALID_IMAGE",
	ErrorInvalidContext:        "CUDA_ERROR_INVALID_CONTEXT",
	ErrorContextAlreadyCurrent: "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
	ErrorNoBinaryForGPU:        "CUDA_ERROR_NO_BINARY_FOR_GPU",
	ErrorInvalidPTX:            "CUDA_ERROR_INVALID_PTX",
	ErrorInvalidSource:         "CUDA_ERROR_INVALID_SOURCE",
	ErrorFileNotFound:          "CUDA_ERROR_FILE_NOT_FOUND",
	ErrorInvalidHandle:         "CUDA_ERROR_INVALID_HANDLE",
	ErrorIllegalState:          "CUDA_ERROR_ILLEGAL_STATE",
	ErrorNotFound:              "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady:              "CUDA_ERROR_NOT_READY",
	ErrorIllegalAddress:        "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrorLaunchOutOfResources:  "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	ErrorLaunchTimeout:         "CUDA_ERROR_LAUNCH_TIMEOUT",
	ErrorContextIsDestroyed:    "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	ErrorAssert:                "CUDA_ERROR_ASSERT",
	ErrorHardwareStackError:    "CUDA_ERROR_HARDWARE_STACK_ERROR",
	ErrorIllegalInstruction:    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	ErrorMisalignedAddress:     "CUDA_ERROR_MISALIGNED_ADDRESS",
	ErrorInvalidAddressSpace:   "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	ErrorInvalidPC:             "CUDA_ERROR_INVALID_PC",
	ErrorLaunchFailed:          "CUDA_ERROR_LAUNCH_FAILED",
	ErrorNotPermitted:          "CUDA_ERROR_NOT_PERMITTED",
	ErrorNotSupported:          "CUDA_ERROR_NOT_SUPPORTED",
	ErrorInvalidResourceType:   "CUDA_ERROR_INVALID_RESOURCE_TYPE",
	ErrorInvalidResourceConfig: "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
	ErrorStreamDetached:        "CUDA_ERROR_STREAM_DETACHED",
	ErrorUnknown:               "CUDA_ERROR_UNKNOWN",
	// entry points added for lib
	ErrorStreamCaptureUnsupported: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	ErrorStreamCaptureInvalidated: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	ErrorStreamCaptureUnmatched:   "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	ErrorStreamCaptureWrongThread: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
	errorSymbolMissing:            "FCSP_SYMBOL_MISSING",
	errorLibraryMissing:           "FCSP_LIBRARY_MISSING",
}

// Sticky reports whether r is one of the driver's sticky errors: a fault
// in device code (or a watchdog timeout) after which the context, and every
// other context of the device in this process, answers the same code to
// every call until the device's primary context is reset. The driver API
// documents each as leaving the process "in an inconsistent state".
func (r Result) Sticky() bool {
	switch r {
	case ErrorIllegalAddress, ErrorLaunchTimeout, ErrorAssert, ErrorHardwareStackError,
		ErrorIllegalInstruction, ErrorMisalignedAddress, ErrorInvalidAddressSpace,
		ErrorInvalidPC, ErrorLaunchFailed:
		return true
	}
	return false
}

// StickyIn is the first sticky driver error in err's tree (errors.Join's
// included, which errors.As would stop short of when a plain driver error
// comes first), or nil.
func StickyIn(err error) *Error {
	switch e := err.(type) {
	case *Error:
		if e.Code.Sticky() {
			return e
		}
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if ce := StickyIn(x); ce != nil {
				return ce
			}
		}
	case interface{ Unwrap() error }:
		return StickyIn(e.Unwrap())
	}
	return nil
}

// Name is the driver's name for r, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
func (r Result) Name() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return fmt.Sprintf("CUDA_ERROR_%d", int32(r))
}

func (r Result) Error() string { return fmt.Sprintf("%s (%d)", r.Name(), int32(r)) }

// Error is a failed driver call: which entry point, and its result code.
// errors.Is(err, cuda.ErrorOutOfMemory) and errors.As(err, &res) both work.
type Error struct {
	Op   string // the entry point, e.g. "cuMemAlloc_v2"
	Code Result
}

func (e *Error) Error() string { return e.Op + ": " + e.Code.Error() }

// Is matches the result code without Unwrap's garbage: a polled wait asks
// errors.Is(err, ErrorNotReady) at every poll.
func (e *Error) Is(target error) bool {
	r, ok := target.(Result)
	return ok && e.Code == r
}

// Unwrap exposes the result code, and ErrNoDriver for a missing library.
func (e *Error) Unwrap() []error {
	switch e.Code {
	case errorLibraryMissing:
		return []error{e.Code, ErrNoDriver}
	case errorSymbolMissing:
		return []error{e.Code, ErrNotAvailable}
	}
	return []error{e.Code}
}

// ErrNoDriver means libcuda.so.1 could not be loaded (no NVIDIA driver, or a
// binary built without cgo).
var ErrNoDriver = errors.New("cuda: no CUDA driver found (libcuda.so.1 could not be loaded)")

// ErrNotAvailable means the loaded driver lacks an entry point the SDK needs
// (green contexts need driver API 12.4 or newer).
var ErrNotAvailable = errors.New("cuda: entry point not available in this driver")

// check turns a CUresult into nil or an *Error naming op.
func check(op string, r Result) error {
	if r == Success {
		return nil
	}
	if r == ErrorNotReady {
		// The queries' "not yet", which a polled wait hears thousands of
		// times a request: one value each, not garbage per poll.
		switch op {
		case "cuStreamQuery":
			return streamNotReady
		case "cuEventQuery":
			return eventNotReady
		}
	}
	return &Error{Op: op, Code: r}
}

var (
	streamNotReady = &Error{Op: "cuStreamQuery", Code: ErrorNotReady}
	eventNotReady  = &Error{Op: "cuEventQuery", Code: ErrorNotReady}
)

// AsError is the *Error in err's chain, or nil: errors.As without the
// heap-allocated target that errors.As makes of a local (a polled wait
// classifies thousands of "not ready"s a request).
func AsError(err error) *Error {
	for err != nil {
		switch e := err.(type) {
		case *Error:
			return e
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				if ce := AsError(err); ce != nil {
					return ce
				}
			}
			return nil
		default:
			return nil
		}
	}
	return nil
}

// Check is check for other implementations of Driver (the fake).
func Check(op string, r Result) error { return check(op, r) }
