package fcsp

import (
	"errors"

	"github.com/fcsp-go/fcsp-go/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Sentinel errors, for errors.Is.
var (
	// ErrNoDriver: no NVIDIA driver could be loaded (use WithSimulator to
	// run on the in-process fake device instead).
	ErrNoDriver = cuda.ErrNoDriver
	// ErrNotAvailable: the driver lacks an entry point (green contexts need
	// driver API 12.4+).
	ErrNotAvailable = cuda.ErrNotAvailable
	// ErrGranularity: an SM count is not a whole number of the groups the
	// driver cuts; the message names the group size.
	ErrGranularity = greenctx.ErrGranularity
	// ErrInsufficientSMs: not enough unpartitioned SMs are left.
	ErrInsufficientSMs = greenctx.ErrInsufficientSMs
	// ErrQuotaExceeded: an allocation would pass a tenant's or the device's
	// memory limit; the *memtrack.QuotaError says requested, used and limit.
	ErrQuotaExceeded = memtrack.ErrQuotaExceeded
	// ErrUnknownPointer: Free of a pointer this tenant did not allocate, or
	// already freed. No counter changes.
	ErrUnknownPointer = memtrack.ErrUnknownPointer
	// ErrClosed: the Pool, Tenant or Stream was closed.
	ErrClosed = errors.New("fcsp: closed")
	// ErrNameTaken: a live tenant of the pool already has this name.
	ErrNameTaken = errors.New("fcsp: tenant name already in use")
	// ErrInvalidArgument: an option or argument is out of range; the
	// message says what is allowed.
	ErrInvalidArgument = errors.New("fcsp: invalid argument")
	// ErrReaped: this process stopped heartbeating in the shared region
	// for longer than the timeout (a stall, a SIGSTOP, a frozen cgroup)
	// and the other processes gave its usage back; every later allocation
	// fails with it. Frees still free the device memory.
	ErrReaped = memtrack.ErrReaped
	// ErrUnsafeRegion: the shared region path is a symbolic link, or a file
	// another user owns or every user may write (see
	// WithForeignSharedRegion).
	ErrUnsafeRegion = shm.ErrUnsafeRegion
)

// CUDA result codes the SDK passes through, for errors.Is. Any driver
// failure is a *CUDAError; errors.As gives its entry point and code.
var (
	ErrDeviceOutOfMemory = cuda.ErrorOutOfMemory
	ErrInvalidContext    = cuda.ErrorInvalidContext
	ErrInvalidValue      = cuda.ErrorInvalidValue
)

// CUDAError is a failed driver call: which entry point and its CUresult.
type CUDAError = cuda.Error

// Result is a CUresult; it implements error.
type Result = cuda.Result
