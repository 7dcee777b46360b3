package fcsp

import (
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Sentinel errors, for errors.Is.
var (
	// ErrNoDriver: no NVIDIA driver could be loaded (tests and demos can
	// run on a simulated device instead: fcsptest.SimulatedH200).
	ErrNoDriver = cuda.ErrNoDriver
	// ErrNotAvailable: the driver lacks an entry point (green contexts need
	// driver API 12.4+).
	ErrNotAvailable = cuda.ErrNotAvailable
	// ErrGranularity: an SM count is not a whole number of the groups the
	// driver cuts; the message names the group size.
	ErrGranularity = smpart.ErrGranularity
	// ErrInsufficientSMs: not enough unpartitioned SMs are left.
	ErrInsufficientSMs = smpart.ErrInsufficientSMs
	// ErrQuotaExceeded: an allocation would pass a tenant's or the device's
	// memory limit; the *memtrack.QuotaError says requested, used and limit.
	ErrQuotaExceeded = memtrack.ErrQuotaExceeded
	// ErrUnknownPointer: Free of a pointer this tenant did not allocate, or
	// already freed. No counter changes.
	ErrUnknownPointer = memtrack.ErrUnknownPointer
	// ErrClosed: the Pool, Tenant or Stream was closed. It is the module's
	// one ErrClosed: a call racing a close fails with it whichever layer
	// (partition, token bucket, quota account) saw the close first.
	ErrClosed = errs.ErrClosed
	// ErrFewWorkQueues: CUDA_DEVICE_MAX_CONNECTIONS leaves the process too
	// few hardware work queues for a partition to isolate: streams of
	// different partitions would share a queue, and one class's queued work
	// would hold up another's however its SMs are split.
	ErrFewWorkQueues = errs.ErrFewWorkQueues
	// ErrBadRegion: a shared region file of another version, or corrupt;
	// the message says which. Remove it (with every process that used it
	// stopped) or give another path.
	ErrBadRegion = shm.ErrBadRegion
	// ErrThrottled: TryLaunch found the stream's or the tenant's bucket
	// without the tokens the launch costs; nothing was launched or charged.
	ErrThrottled = errs.ErrThrottled
	// ErrInsideDo: a call that would wait for the tenant's Dos to end
	// (Close, Shutdown, Reshape; the pool's Close and Shutdown) was made
	// from inside one, where it would wait for itself.
	ErrInsideDo = errs.ErrInsideDo
	// ErrDeviceLost: a sticky device error (illegal address, illegal
	// instruction, misaligned address, launch failure, hardware stack
	// error, device assert, watchdog timeout) poisoned the device for every
	// tenant of this process. The *DeviceLostError says which error, where
	// it was first seen. The way back is a new process: the driver keeps
	// the fault until this one exits (Health.RestartRequired).
	ErrDeviceLost = errs.ErrDeviceLost
	// ErrNotComputed: on the simulator (fcsptest), a launch of a kernel
	// the simulator has no model for. The launch is admitted, ordered and
	// counted like any other, but no memory was written: the simulator runs
	// only the sample kernels (chain, spin) for real. On a GPU it never
	// occurs.
	ErrNotComputed = errs.ErrNotComputed
	// ErrStaleGraph: a graph captured before its tenant's Reshape: it would
	// run on the SMs the tenant had then, by now perhaps a neighbour's.
	// Capture it again.
	ErrStaleGraph = errs.ErrStaleGraph
	// ErrNameTaken: a live tenant of the pool already has this name.
	ErrNameTaken = errs.ErrNameTaken
	// ErrInvalidArgument: an option or argument is out of range; the
	// message says what is allowed. The lower packages' finer sentinels
	// (tokenbucket.ErrInvalidConfig, memtrack.ErrInvalidSize, ...) match it.
	ErrInvalidArgument = errs.ErrInvalidArgument
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

// CUDAError is a failed driver call: its field Op is the entry point (e.g.
// "cuMemAlloc_v2"), Code the CUresult. Take one out of an error with
//
//	var ce *fcsp.CUDAError
//	if errors.As(err, &ce) { log.Print(ce.Op, ce.Code.Name()) }
//
// and match a code with errors.Is(err, fcsp.ErrDeviceOutOfMemory). (An
// alias of the binding's type, so that errors from every layer match
// without conversion.)
type CUDAError = cuda.Error

// Result is a CUresult, the driver's status code. It implements error, so
// the codes above match with errors.Is; Name is the driver's name for it
// (e.g. "CUDA_ERROR_OUT_OF_MEMORY") and int32(r) its number.
type Result = cuda.Result
