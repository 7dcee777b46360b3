package fcsp

import (
	"errors"
	"fmt"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/dra"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/internal/shm"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Sentinel errors, for errors.Is. Each is the module's one value for its
// meaning, whichever package reports it (those of internal packages are
// set in this file's init, before any importer can read them).
var (
	// ErrNoDriver: no NVIDIA driver could be loaded (tests and demos can
	// run on a simulated device instead: fcsptest.SimulatedH200).
	ErrNoDriver error
	// ErrNotAvailable: the driver lacks an entry point (green contexts need
	// driver API 12.4+).
	ErrNotAvailable error
	// ErrGranularity: an SM count the device's split (or the tenant's
	// reshape sizes) cannot make; the message names the sizes it can.
	ErrGranularity error
	// ErrInsufficientSMs: not enough unpartitioned SMs are left.
	ErrInsufficientSMs error
	// ErrQuotaExceeded: an allocation would pass a tenant's or the device's
	// memory limit; the *memtrack.QuotaError says requested, used and limit.
	ErrQuotaExceeded = memtrack.ErrQuotaExceeded
	// ErrUnknownPointer: Free of a pointer this tenant did not allocate, or
	// already freed. No counter changes.
	ErrUnknownPointer = memtrack.ErrUnknownPointer
	// ErrOutOfRange: a copy or memset that runs past the end of the SDK's
	// block it starts in, refused before the driver; the message names the
	// block's size, the offset and the length. It matches
	// ErrInvalidArgument too. A pointer the SDK did not allocate is the
	// driver's to judge.
	ErrOutOfRange error
	// ErrGreenContextLimit: one more green context would pass the pool's
	// WithGreenContextLimit; the message says how many were made and what
	// makes them.
	ErrGreenContextLimit error
	// ErrClosed: the Pool, Tenant or Stream was closed. It is the module's
	// one ErrClosed: a call racing a close fails with it whichever layer
	// (partition, token bucket, quota account) saw the close first.
	ErrClosed error
	// ErrFewWorkQueues: CUDA_DEVICE_MAX_CONNECTIONS leaves the process too
	// few hardware work queues for a partition to isolate: streams of
	// different partitions would share a queue, and one class's queued work
	// would hold up another's however its SMs are split.
	ErrFewWorkQueues error
	// ErrBadRegion: a shared region file of another version, or corrupt;
	// the message says which. Remove it (with every process that used it
	// stopped) or give another path.
	ErrBadRegion error
	// ErrThrottled: TryLaunch found the stream's or the tenant's bucket
	// without the tokens the launch costs; nothing was launched or charged.
	ErrThrottled error
	// ErrInsideDo: a call that would wait for the tenant's Dos to end
	// (Close, Shutdown, Reshape; the pool's Close and Shutdown) was made
	// from inside one, where it would wait for itself.
	ErrInsideDo error
	// ErrDeviceLost: a sticky device error (illegal address, illegal
	// instruction, misaligned address, launch failure, hardware stack
	// error, device assert, watchdog timeout) poisoned the device for every
	// tenant of this process. The *DeviceLostError says which error, where
	// it was first seen. The way back is a new process: the driver keeps
	// the fault until this one exits (Health.RestartRequired).
	ErrDeviceLost error
	// ErrNotComputed: on the simulator (fcsptest), a launch of a kernel
	// the simulator has no model for. The launch is admitted, ordered and
	// counted like any other, but no memory was written: the simulator runs
	// only the sample kernels (chain, spin) for real. On a GPU it never
	// occurs.
	ErrNotComputed error
	// ErrStaleGraph: a graph captured before its tenant's Reshape: it would
	// run on the SMs the tenant had then, by now perhaps a neighbour's.
	// Capture it again.
	ErrStaleGraph error
	// ErrNameTaken: a live tenant of the pool already has this name.
	ErrNameTaken error
	// ErrDeviceInUse: Open of a device this process has open already.
	// Each pool hands out SMs from one map of the device; a second would
	// hand out the same SMs again. Share the first *Pool (it is safe for
	// concurrent use), or Close it first.
	ErrDeviceInUse error
	// ErrStalled: the tenant's work made no progress for its stall bound
	// (WithStallTimeout): a kernel that never ended, a stream waiting for
	// an event nobody records. Its calls return it at once; Health names
	// the stream and since when. The stuck work holds the tenant's SMs and
	// memory until the process exits.
	ErrStalled error
	// ErrInvalidArgument: an option or argument is out of range; the
	// message says what is allowed. The lower packages' finer sentinels
	// (tokenbucket.ErrInvalidConfig, memtrack.ErrInvalidSize, ...) match it.
	ErrInvalidArgument error
	// ErrReaped: this process stopped heartbeating in the shared region
	// for longer than the timeout (a stall, a SIGSTOP, a frozen cgroup)
	// and the other processes gave its usage back; every later allocation
	// fails with it. Frees still free the device memory.
	ErrReaped = memtrack.ErrReaped
	// ErrUnsafeRegion: the shared region path is a symbolic link, or a file
	// another user owns or every user may write (see
	// WithForeignSharedRegion).
	ErrUnsafeRegion error
	// ErrDeviceNotVisible: the GPU a DRA claim got (WithDRAMetadata) is
	// not among the devices this process sees; the message names both.
	ErrDeviceNotVisible error
	// ErrWarmupFailed: the tenant's warm-up (WithWarmup) failed or
	// panicked in one of its contexts, the error wrapping its own and
	// naming the context's size: at NewTenant, which closed the tenant,
	// or later in a context a Do took, which that Do returns.
	ErrWarmupFailed = errors.New("fcsp: the tenant's warm-up failed")
)

// The sentinels internal packages define, set before any package that
// imports this one runs. A package-level var of this package must not read
// them (it would be initialised first, and read nil): it uses errs'
// values (TestNoPackageVarReadsAReexport holds the package to it).
func init() {
	ErrNoDriver, ErrNotAvailable = cuda.ErrNoDriver, cuda.ErrNotAvailable
	ErrGranularity, ErrInsufficientSMs = smpart.ErrGranularity, smpart.ErrInsufficientSMs
	ErrBadRegion, ErrUnsafeRegion = shm.ErrBadRegion, shm.ErrUnsafeRegion
	ErrDeviceNotVisible = dra.ErrNotVisible
	ErrClosed, ErrFewWorkQueues, ErrThrottled = errs.ErrClosed, errs.ErrFewWorkQueues, errs.ErrThrottled
	ErrInsideDo, ErrDeviceLost, ErrNotComputed = errs.ErrInsideDo, errs.ErrDeviceLost, errs.ErrNotComputed
	ErrStaleGraph, ErrNameTaken, ErrInvalidArgument = errs.ErrStaleGraph, errs.ErrNameTaken, errs.ErrInvalidArgument
	ErrDeviceInUse, ErrOutOfRange, ErrStalled, ErrGreenContextLimit = errs.ErrDeviceInUse, errs.ErrOutOfRange, errs.ErrStalled, errs.ErrGreenContextLimit
}

// CUDA result codes the SDK passes through, for errors.Is. Any driver
// failure is a *CUDAError; errors.As gives its entry point and code.
var (
	// ErrDeviceOutOfMemory (CUDA_ERROR_OUT_OF_MEMORY, 2): the device had no
	// memory for the driver's allocation.
	ErrDeviceOutOfMemory Result = 2
	// ErrInvalidValue (CUDA_ERROR_INVALID_VALUE, 1).
	ErrInvalidValue Result = 1
	// ErrInvalidImage (CUDA_ERROR_INVALID_IMAGE, 200): LoadModule of
	// bytes that are neither PTX nor a cubin the driver can load.
	ErrInvalidImage Result = 200
	// ErrNotFound (CUDA_ERROR_NOT_FOUND, 500): Module.Function of a name
	// the module does not define.
	ErrNotFound Result = 500
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

// TenantError is the error of a call on a tenant or on what it made (its
// Streams, Modules, Events, Graphs, Scopes, Workspaces, a Do's Current), as
// *os.PathError is a file's: which tenant, which call, and why. Its text is
//
//	tenant "name": Op: cause
//
// and names the tenant and the call once: the cause, an engine's error,
// names neither. errors.Is and errors.As see through it to the cause's
// sentinels and types (ErrQuotaExceeded, *CUDAError, *DeviceLostError).
//
// Three answers come without one: a call through a Stream handle whose
// stream is closed (ErrClosed) or that is nil names no tenant any more;
// ErrThrottled, TryLaunch's and TryDo's "not now", is an answer rather
// than a failure, as io.EOF is, so a caller that polls makes no garbage;
// and the error Do's, DoEach's, Scope's or Capture's f returns is f's
// own, returned as is.
type TenantError struct {
	Tenant string // the tenant's name
	Op     string // the call: "Alloc", "Stream.Launch", "NewTenant", ...
	Err    error  // why
}

// Error is `tenant "name": Op: cause`.
func (e *TenantError) Error() string {
	return fmt.Sprintf("tenant %q: %s: %v", e.Tenant, e.Op, e.Err)
}

// Unwrap gives the cause.
func (e *TenantError) Unwrap() error { return e.Err }

// tenantErr is the one place a tenant's error is made (TenantError): err,
// an engine's bare error, named with the tenant and the call op. nil and
// ErrThrottled pass as they are.
func tenantErr(tenant, op string, err error) error {
	if err == nil || err == ErrThrottled {
		return err
	}
	return &TenantError{Tenant: tenant, Op: op, Err: err}
}

// fail is tenantErr for the tenant's own calls.
func (c *tenantCore) fail(op string, err error) error { return tenantErr(c.name, op, err) }

// tenantName is how a message names a tenant other than the one whose
// call failed (TenantError names that one).
func tenantName(name string) string { return fmt.Sprintf("tenant %q", name) }

// errNilFunc answers a call given a nil function to run.
var errNilFunc = fmt.Errorf("%w: a nil function; pass the function to run", errs.ErrInvalidArgument)

// errNotLimited answers SetSMLimit on a tenant made without a limit.
var errNotLimited = fmt.Errorf("%w: the tenant was made without WithSMLimit, and a limit is set when the tenant is made", errs.ErrInvalidArgument)

// errNotReshapable answers Reshape on a tenant made with one size.
var errNotReshapable = fmt.Errorf("%w: the tenant was made without WithReshapeSizes, and its sizes are set when it is made", errs.ErrInvalidArgument)

// errNilContext answers every call given a nil context.Context: one
// answer everywhere, where some calls panicked and others did not.
var errNilContext = fmt.Errorf("%w: a nil context.Context; pass one (context.Background() where nothing bounds the call)", errs.ErrInvalidArgument)

// Error says what was lost, where it was first seen, and what to do. The
// driver call is named once: the CUDAError's own Op, with the call that
// saw it where that was another (a cleanup's).
func (e *DeviceLostError) Error() string {
	where := "outside any tenant"
	if e.Tenant != "" {
		where = "by " + tenantName(e.Tenant)
	}
	if e.Stream != 0 {
		where += fmt.Sprintf(" on stream %#x", e.Stream)
	}
	var code error = ErrDeviceLost
	from := e.Op
	if e.Err != nil {
		code = e.Err.Code
		if e.Err.Op != "" && e.Err.Op != e.Op {
			from = e.Err.Op + " (" + e.Op + ")"
		}
	}
	return fmt.Sprintf("fcsp: device lost: %v from %s, first seen %s at %s; every tenant of this process shares the fault and the driver keeps it until the process exits: restart the process",
		code, from, where, e.At.Format(time.RFC3339Nano))
}
