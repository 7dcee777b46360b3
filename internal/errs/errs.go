// Package errs defines, once, the error identities that more than one
// package of the module reports, so that errors.Is matches them whichever
// layer returned the error: a launch racing a close fails with the same
// ErrClosed whether the tenant, its partition or its token bucket saw the
// close first. Public packages re-export them (var ErrClosed =
// errs.ErrClosed), as cilium/ebpf does with ErrNotSupported.
package errs

// ErrClosed: a call on something already closed.
var ErrClosed error = &sentinel{msg: "fcsp: closed"}

// ErrInvalidArgument: an option or argument is out of range; errors that
// match it say what was wrong and what is allowed.
var ErrInvalidArgument error = &sentinel{msg: "fcsp: invalid argument"}

// ErrDeviceLost: a sticky device error poisoned the device for every
// tenant of the process (fcsp.ErrDeviceLost says more).
var ErrDeviceLost error = &sentinel{msg: "fcsp: device lost"}

// New returns a sentinel with its own identity and message that also
// matches parent under errors.Is: a finer meaning of a shared one (an
// invalid size is an invalid argument).
func New(msg string, parent error) error { return &sentinel{msg: msg, parent: parent} }

type sentinel struct {
	msg    string
	parent error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.parent }

// ErrNotComputed: the simulator (the fake driver) launched a kernel it has
// no model for; fcsp re-exports it without linking the fake.
var ErrNotComputed error = &sentinel{msg: "fake: kernel not computed: the simulator has no model of it (memory left untouched)"}

// ErrThrottled: a launch (TryLaunch) or Do (TryDo) found its bucket
// without its tokens now; nothing was charged or run.
var ErrThrottled error = &sentinel{msg: "fcsp: launch throttled (its tokens are not available now)"}

// ErrFewWorkQueues: CUDA_DEVICE_MAX_CONNECTIONS leaves the process too few
// hardware work queues for a partition to isolate (fcsp.ErrFewWorkQueues).
var ErrFewWorkQueues error = &sentinel{msg: "fcsp: too few hardware work queues for SM partitions"}

// ErrInsideDo: a call that would wait for the tenant's Dos to end was made
// from inside one (fcsp.ErrInsideDo).
var ErrInsideDo error = &sentinel{msg: "fcsp: called from inside a Do that it would wait for"}

// ErrStaleGraph: a graph captured before its tenant's Reshape
// (fcsp.ErrStaleGraph).
var ErrStaleGraph error = &sentinel{msg: "fcsp: graph captured for the tenant's SMs before a Reshape"}

// ErrNameTaken: a live tenant of the pool already has the name
// (fcsp.ErrNameTaken).
var ErrNameTaken error = &sentinel{msg: "fcsp: tenant name already in use"}

// ErrDeviceInUse: the device is open already in this process, by a pool
// (or a greenctx.Device) that holds its SM map (fcsp.ErrDeviceInUse).
var ErrDeviceInUse error = &sentinel{msg: "fcsp: device already open in this process"}

// ErrOutOfRange: a copy or fill that starts inside a block the SDK
// allocated runs past its end (fcsp.ErrOutOfRange). It matches
// ErrInvalidArgument too.
var ErrOutOfRange error = New("fcsp: range runs past the end of its allocation", ErrInvalidArgument)

// ErrStalled: the tenant's work made no progress for its stall bound
// (fcsp.ErrStalled).
var ErrStalled error = &sentinel{msg: "fcsp: tenant stalled"}

// ErrQuotaExceeded: an allocation, or an object the SDK makes, would pass
// a tenant's or the device's memory limit (memtrack.ErrQuotaExceeded,
// which every *memtrack.QuotaError matches). Here so that a mechanism
// below memtrack (internal/smpart's slots) can tell the refusal apart.
var ErrQuotaExceeded error = &sentinel{msg: "memory quota exceeded"}

// ErrGreenContextLimit: one more green context would pass the pool's
// bound on them (fcsp.WithGreenContextLimit).
var ErrGreenContextLimit error = &sentinel{msg: "fcsp: green context limit reached"}
