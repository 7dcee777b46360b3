package fake

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// KernelFunc runs a kernel on the fake device. args is the packed parameter
// buffer with offs the start of each parameter (see cuda.Args).
type KernelFunc func(mem *Memory, grid, block cuda.Dim3, args []byte, offs []uint32) error

// Driver is the fake. The zero value is not usable; call New.
type Driver struct {
	spec Spec

	mu         sync.Mutex
	greenCalls map[string]int // calls that pushed a green context (GreenContextCalls)
	next       uintptr        // handle counter
	splitGen   uint64
	primary    map[cuda.Device]*context
	contexts   map[cuda.Context]*context
	greens     map[cuda.GreenCtx]*green
	descs      map[cuda.ResourceDesc]descInfo
	streams    map[cuda.Stream]*streamInfo
	events     map[cuda.Event]*eventInfo
	modules    map[cuda.Module]*module
	funcs      map[cuda.Function]*function
	pools      map[cuda.MemPool]*pool
	scopedOnly bool
	kernels    map[string]KernelFunc
	failNext   map[string][]cuda.Result
	calls      map[string]int
	mem        Memory
	launches   int
	libs       libState                    // entry points added for lib (graph.go)
	sticky     map[cuda.Device]cuda.Result // fault.go
	resettable bool                        // fault.go: SetResettableFaults
	resets     int

	// entry points added for share
	durations  map[string]DurationFunc // modelled kernel run times
	holdEvents bool                    // EventQuery answers not ready

	// entry points added for bw
	heldCtx map[cuda.Context]bool // EventQuery answers not ready for these contexts' events (hold.go)

	// Streams' queues (queue.go). cond is signalled, with mu, whenever a
	// stream's work moves on: an item done, a hold released, a queue
	// dropped. kernelHolds, forever and spins hold launches.
	cond        *sync.Cond
	null        *streamInfo // the NULL stream
	kernelHolds map[string][]*hold
	forever     map[string]func(args []byte, offs []uint32) bool
	spins       *hold
}

type context struct {
	dev       cuda.Device
	green     *green
	primary   bool
	refs      int
	destroyed bool
	// kept is device memory the driver holds for the primary context's
	// life: GreenCtxCost for each green context made while it lives,
	// which cuGreenCtxDestroy does not give back (GreenCtxCost's doc).
	kept uint64
}

type green struct {
	handle    cuda.GreenCtx
	ctx       cuda.Context
	sms       uint32
	set       smSet // which SMs (sms.go)
	res       cuda.DevResource
	destroyed bool
}

type descInfo struct {
	sms uint32
	set smSet
}

type streamInfo struct {
	ctx      cuda.Context
	prio     int // its priority, clamped to the device's range (StreamPriority)
	launches int
	gpu      time.Duration // modelled GPU time of its launches (SetKernelDuration)
	capture  *capture      // entry points added for lib: non-nil while capturing
	// detached: its green context was destroyed. The stream lives on
	// until cuStreamDestroy, the only call it still answers.
	detached bool
	// Its queue (queue.go): issued and done count its items, queue holds
	// those not done (the head may be running).
	issued, done uint64
	queue        []*work
	running      bool // the head runs, on a caller's goroutine or drain's
	draining     bool // drain runs the queue
	dead         bool // a reset dropped it
}

type eventInfo struct {
	ctx cuda.Context
	on  cuda.Context // the context of the stream it was last recorded on
	rec mark         // where it was last recorded: complete once reached
	at  time.Time
	gpu time.Duration // the stream's modelled GPU time when recorded
	set bool
}

type module struct {
	ctx     cuda.Context
	entries map[string]bool
	cost    uint64 // cuda.ModuleCost of its image
}

type function struct {
	mod  *module
	name string
}

// New returns a fake driver for spec.
func New(spec Spec) *Driver {
	if spec.Devices == 0 {
		spec.Devices = 1
	}
	spec = spec.withLimits()
	d := &Driver{
		spec:     spec,
		next:     0x1000,
		primary:  map[cuda.Device]*context{},
		contexts: map[cuda.Context]*context{},
		greens:   map[cuda.GreenCtx]*green{},
		descs:    map[cuda.ResourceDesc]descInfo{},
		streams:  map[cuda.Stream]*streamInfo{},
		events:   map[cuda.Event]*eventInfo{},
		modules:  map[cuda.Module]*module{},
		funcs:    map[cuda.Function]*function{},
		pools:    map[cuda.MemPool]*pool{},
		kernels:  map[string]KernelFunc{},
		failNext: map[string][]cuda.Result{},
		calls:    map[string]int{},
		mem:      Memory{total: spec.TotalMem, allocs: map[cuda.DevicePtr][]byte{}, next: 0x7f0000000000},
		null:     &streamInfo{},
	}
	d.cond = sync.NewCond(&d.mu)
	return d
}

// Spec returns the simulated device's description.
func (d *Driver) Spec() Spec { return d.spec }

// RegisterKernel gives the kernel called name a Go body.
func (d *Driver) RegisterKernel(name string, k KernelFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.kernels[name] = k
}

// RequireContext makes the fake refuse zero-context (unscoped) launches and
// synchronisations with CUDA_ERROR_INVALID_CONTEXT, as a driver that wants
// a current context would.
func (d *Driver) RequireContext() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scopedOnly = true
}

// FailNext makes the next call of entry point op (e.g. "cuMemAlloc_v2")
// return r; calls queue up.
func (d *Driver) FailNext(op string, r cuda.Result) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failNext[op] = append(d.failNext[op], r)
}

// Calls says how many times entry point op was called.
func (d *Driver) Calls(op string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[op]
}

// Launches counts successful kernel launches.
func (d *Driver) Launches() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.launches
}

// Live reports handles still alive (leak checks): contexts besides primary
// ones, green contexts, streams, events, modules, and allocated bytes.
type Live struct {
	Contexts, GreenCtxs, Streams, Events, Modules, PrimaryRefs int
	Bytes                                                      uint64
}

// Live counts what is still allocated.
func (d *Driver) Live() Live {
	d.mu.Lock()
	defer d.mu.Unlock()
	var l Live
	for _, c := range d.contexts {
		if !c.destroyed && !c.primary && c.green == nil {
			l.Contexts++
		}
	}
	for _, p := range d.primary {
		l.PrimaryRefs += p.refs
	}
	for _, g := range d.greens {
		if !g.destroyed {
			l.GreenCtxs++
		}
	}
	l.Streams, l.Events, l.Modules = len(d.streams), len(d.events), len(d.modules)
	l.Bytes = d.mem.used
	return l
}

// enter records a call of op and returns an injected failure, if any. The
// caller holds d.mu.
func (d *Driver) enter(op string) error {
	d.calls[op]++
	if q := d.failNext[op]; len(q) > 0 {
		d.failNext[op] = q[1:]
		return cuda.Check(op, q[0])
	}
	return nil
}

func (d *Driver) handle() uintptr { d.next += 0x10; return d.next }

func (d *Driver) Name() string { return "fake driver: " + d.spec.Name }

func (d *Driver) DriverVersion() (int, error) { return d.spec.APIVersion, nil }

func (d *Driver) DeviceCount() (int, error) { return d.spec.Devices, nil }

func (d *Driver) device(op string, dev cuda.Device) error {
	if dev < 0 || int(dev) >= d.spec.Devices {
		return cuda.Check(op, cuda.ErrorInvalidDevice)
	}
	return nil
}

func (d *Driver) DeviceGet(ordinal int) (cuda.Device, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter("cuDeviceGet"); err != nil {
		return 0, err
	}
	return cuda.Device(ordinal), d.device("cuDeviceGet", cuda.Device(ordinal))
}

func (d *Driver) DeviceName(dev cuda.Device) (string, error) {
	return d.spec.Name, d.device("cuDeviceGetName", dev)
}

func (d *Driver) DeviceUUID(dev cuda.Device) ([16]byte, error) {
	var u [16]byte
	copy(u[:], "fake-gpu-uuid-")
	u[15] = byte(dev)
	return u, d.device("cuDeviceGetUuid", dev)
}

func (d *Driver) DeviceAttribute(dev cuda.Device, a cuda.Attribute) (int, error) {
	if err := d.device("cuDeviceGetAttribute", dev); err != nil {
		return 0, err
	}
	switch a {
	case cuda.AttrMultiprocessorCount:
		return int(d.spec.SMs), nil
	case cuda.AttrComputeCapabilityMajor:
		return d.spec.CCMajor, nil
	case cuda.AttrComputeCapabilityMinor:
		return d.spec.CCMinor, nil
	case cuda.AttrMaxThreadsPerSM:
		return d.spec.MaxThreadsPerSM, nil
	case cuda.AttrMaxThreadsPerBlock:
		return int(d.spec.MaxThreadsPerBlock), nil
	case cuda.AttrMaxBlockDimX, cuda.AttrMaxBlockDimY, cuda.AttrMaxBlockDimZ:
		return int(d.spec.MaxBlock[a-cuda.AttrMaxBlockDimX]), nil
	case cuda.AttrMaxGridDimX, cuda.AttrMaxGridDimY, cuda.AttrMaxGridDimZ:
		return int(d.spec.MaxGrid[a-cuda.AttrMaxGridDimX]), nil
	case cuda.AttrMaxSharedMemoryPerBlock:
		return int(d.spec.MaxSharedPerBlock), nil
	case cuda.AttrMaxSharedMemoryPerBlockOptin:
		return int(d.spec.MaxSharedPerBlockOptin), nil
	case cuda.AttrClockRate:
		return 1980000, nil
	}
	return 0, cuda.Check("cuDeviceGetAttribute", cuda.ErrorInvalidValue)
}

func (d *Driver) DeviceTotalMem(dev cuda.Device) (uint64, error) {
	return d.spec.TotalMem, d.device("cuDeviceTotalMem_v2", dev)
}

func (d *Driver) PrimaryCtxRetain(dev cuda.Device) (cuda.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter("cuDevicePrimaryCtxRetain"); err != nil {
		return 0, err
	}
	if err := d.device("cuDevicePrimaryCtxRetain", dev); err != nil {
		return 0, err
	}
	if err := d.poisoned("cuDevicePrimaryCtxRetain", dev); err != nil {
		return 0, err // as on the H200 after a reset of a faulted device (fault.go)
	}
	p := d.primary[dev]
	if p == nil {
		p = &context{dev: dev, primary: true}
		d.primary[dev] = p
		d.contexts[cuda.Context(d.handle())] = p
	}
	p.refs++
	for h, c := range d.contexts {
		if c == p {
			return h, nil
		}
	}
	panic("unreachable")
}

func (d *Driver) PrimaryCtxRelease(dev cuda.Device) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter("cuDevicePrimaryCtxRelease_v2"); err != nil {
		return err
	}
	p := d.primary[dev]
	if p == nil || p.refs == 0 {
		return cuda.Check("cuDevicePrimaryCtxRelease_v2", cuda.ErrorInvalidContext)
	}
	p.refs--
	if p.refs == 0 { // the driver destroys the primary context, and with it what it kept
		p.kept = 0
	}
	return nil
}

func (d *Driver) CtxCreate(dev cuda.Device) (cuda.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter("cuCtxCreate"); err != nil {
		return 0, err
	}
	if err := d.device("cuCtxCreate", dev); err != nil {
		return 0, err
	}
	h := cuda.Context(d.handle())
	d.contexts[h] = &context{dev: dev}
	return h, nil
}

func (d *Driver) CtxDestroy(c cuda.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.enter("cuCtxDestroy_v2"); err != nil {
		return err
	}
	x := d.contexts[c]
	if x == nil || x.destroyed || x.primary || x.green != nil {
		return cuda.Check("cuCtxDestroy_v2", cuda.ErrorInvalidContext)
	}
	x.destroyed = true
	return nil
}

// ctx validates a context argument; the caller holds d.mu.
func (d *Driver) ctx(op string, c cuda.Context) (*context, error) {
	if err := d.enter(op); err != nil {
		return nil, err
	}
	x := d.contexts[c]
	switch {
	case c == 0 || x == nil:
		return nil, cuda.Check(op, cuda.ErrorInvalidContext)
	case x.destroyed:
		return nil, cuda.Check(op, cuda.ErrorContextIsDestroyed)
	case x.primary && x.refs == 0:
		return nil, cuda.Check(op, cuda.ErrorInvalidContext)
	}
	if err := d.poisoned(op, x.dev); err != nil {
		return nil, err
	}
	d.checkOverlap(c)
	if x.green != nil && !d.currentHere(c) {
		if d.greenCalls == nil {
			d.greenCalls = map[string]int{}
		}
		d.greenCalls[op]++
	}
	return x, nil
}

// family is what a module's functions and a stream must share for a
// launch: the device, for its primary context and the green contexts built
// on it; the context itself for one made by cuCtxCreate.
func (d *Driver) family(c cuda.Context) any {
	if x := d.contexts[c]; x != nil && (x.primary || x.green != nil) {
		return x.dev
	}
	return c
}

// GreenContextCalls counts, per entry point, the calls made with a green
// context as the context to push, where that context is not already current
// on the calling thread (inside a Do it is, and pushing it again is free
// and safe): what the SDK makes so must hold one of the partition's slots,
// so a test can check that only the calls that need one do
// (docs/CONTEXTS.md).
func (d *Driver) GreenContextCalls() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.greenCalls)
}

// CtxSynchronize waits for the work issued so far on c's streams and the
// NULL stream.
func (d *Driver) CtxSynchronize(c cuda.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.ctx("cuCtxSynchronize", c)
	if err == nil {
		err = d.refuseDuringCapture("cuCtxSynchronize", c)
	}
	if err == nil {
		marks := []mark{markOf(d.null)}
		for _, st := range d.streams {
			if st.ctx == c {
				marks = append(marks, markOf(st))
			}
		}
		d.waitFor(marks...)
	}
	d.releaseAboveThreshold()
	return err
}

func (d *Driver) MemAlloc(c cuda.Context, n uint64) (cuda.DevicePtr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemAlloc_v2"
	if _, err := d.ctx(op, c); err != nil {
		return 0, err
	}
	if err := d.refuseDuringCapture(op, c); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	p, ok := d.mem.alloc(n)
	if !ok {
		return 0, cuda.Check(op, cuda.ErrorOutOfMemory)
	}
	return p, nil
}

func (d *Driver) MemFree(c cuda.Context, p cuda.DevicePtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuMemFree_v2"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	if !d.mem.free(p) {
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	return nil
}

func (d *Driver) MemGetInfo(c cuda.Context) (uint64, uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.ctx("cuMemGetInfo_v2", c); err != nil {
		return 0, 0, err
	}
	return d.mem.total - min(d.mem.total, d.heldLocked()), d.mem.total, nil
}

// GreenCtxCost is the device memory each green context costs the driver
// for as long as the device's primary context lives: measured on an H100
// (driver 580, docs/BENCHMARKS.md run UU) with bare driver calls, 4 MiB
// per cuGreenCtxCreate that cuGreenCtxDestroy does not give back while
// the primary context is retained. It comes back when the primary
// context's last reference is released.
const GreenCtxCost = cuda.GreenCtxCost

// objectsLocked is what the live streams, events and modules hold of the
// device (cuda.StreamCost, EventCost, ModuleCost: what the SDK charges
// for them). The caller holds d.mu.
func (d *Driver) objectsLocked() (n uint64) {
	n = uint64(len(d.streams))*cuda.StreamCost + uint64(len(d.events))*cuda.EventCost
	for _, m := range d.modules {
		n += m.cost
	}
	return n
}

// ProcessMemory is the device memory the process holds, as NVML reports
// it for the process (nvmlDeviceGetComputeRunningProcesses): allocations
// and what pools map, what the primary contexts keep of the green
// contexts made, the live streams', events' and modules' costs, and
// Spec.PrimaryCtxCost per retained primary context. A pool opened on the
// fake samples it where a GPU's pool asks NVML (internal/memwatch).
func (d *Driver) ProcessMemory() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.heldLocked()
}

// heldLocked is what the process holds of the devices (ProcessMemory).
// The caller holds d.mu.
func (d *Driver) heldLocked() uint64 {
	n := d.mem.used + d.keptLocked() + d.objectsLocked()
	for _, p := range d.primary {
		if p.refs > 0 {
			n += d.spec.PrimaryCtxCost
		}
	}
	return n
}

// keptLocked is what the live primary contexts keep (GreenCtxCost each
// green context). The caller holds d.mu.
func (d *Driver) keptLocked() (n uint64) {
	for _, p := range d.primary {
		n += p.kept
	}
	return n
}

// MemcpyHtoD copies outside the driver's lock, as kernels run: a large copy
// holds up no other call.
func (d *Driver) MemcpyHtoD(c cuda.Context, dst cuda.DevicePtr, src []byte) error {
	b, err := d.copyRange("cuMemcpyHtoD_v2", c, dst, len(src))
	if err == nil {
		copy(b, src)
	}
	return err
}

// copyRange checks a synchronous copy of n bytes at p in context c and
// returns the device bytes.
func (d *Driver) copyRange(op string, c cuda.Context, p cuda.DevicePtr, n int) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.ctx(op, c); err != nil {
		return nil, err
	}
	if err := d.refuseDuringCapture(op, c); err != nil {
		return nil, err
	}
	b, ok := d.mem.slice(p, uint64(n))
	if !ok {
		return nil, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	return b, nil
}

func (d *Driver) MemcpyDtoH(c cuda.Context, dst []byte, src cuda.DevicePtr) error {
	b, err := d.copyRange("cuMemcpyDtoH_v2", c, src, len(dst))
	if err == nil {
		copy(dst, b)
	}
	return err
}

func (d *Driver) StreamCreate(c cuda.Context, flags uint32) (cuda.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.ctx("cuStreamCreate", c); err != nil {
		return 0, err
	}
	if flags&^cuda.StreamNonBlocking != 0 {
		return 0, cuda.Check("cuStreamCreate", cuda.ErrorInvalidValue)
	}
	h := cuda.Stream(d.handle())
	d.streams[h] = &streamInfo{ctx: c}
	return h, nil
}

func (d *Driver) stream(op string, s cuda.Stream) (*streamInfo, error) {
	if s == 0 {
		return d.null, nil
	}
	st := d.streams[s]
	if st == nil {
		return nil, cuda.Check(op, cuda.ErrorInvalidHandle)
	}
	if st.detached {
		return nil, cuda.Check(op, cuda.ErrorStreamDetached)
	}
	return st, nil
}

func (d *Driver) StreamDestroy(c cuda.Context, s cuda.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuStreamDestroy_v2"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	if _, ok := d.streams[s]; !ok || s == 0 {
		return cuda.Check(op, cuda.ErrorInvalidHandle)
	}
	delete(d.streams, s)
	return nil
}

// StreamSynchronize waits for the work issued on s so far (queue.go).
func (d *Driver) StreamSynchronize(c cuda.Context, s cuda.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuStreamSynchronize"
	if err := d.enterStreamCall(op, c, s); err != nil {
		return err
	}
	st, err := d.stream(op, s)
	if err == nil {
		if err := refuseCapturing(op, st); err != nil {
			return err
		}
		d.waitFor(markOf(st))
	}
	d.releaseAboveThreshold()
	return err
}

// enterStreamCall checks a call on stream s made in context c, or with no
// context current (c 0: the stream names it), which a driver that wants a
// current context refuses (RequireContext). The caller holds d.mu.
func (d *Driver) enterStreamCall(op string, c cuda.Context, s cuda.Stream) error {
	if c != 0 || s == 0 {
		_, err := d.ctx(op, c)
		return err
	}
	if err := d.enter(op); err != nil {
		return err
	}
	if d.scopedOnly {
		return cuda.Check(op, cuda.ErrorInvalidContext)
	}
	return d.poisonedAt(op, 0, s)
}

// refuseCapturing fails a wait on a capturing stream and invalidates its
// capture, as the driver does.
func refuseCapturing(op string, st *streamInfo) error {
	if st.capture == nil {
		return nil
	}
	st.capture.invalid = cuda.ErrorStreamCaptureInvalidated
	return cuda.Check(op, cuda.ErrorStreamCaptureUnsupported)
}

// StreamLaunches counts the kernels launched on s.
func (d *Driver) StreamLaunches(s cuda.Stream) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.streams[s]; st != nil {
		return st.launches
	}
	return 0
}

func (d *Driver) EventCreate(c cuda.Context, flags uint32) (cuda.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.ctx("cuEventCreate", c); err != nil {
		return 0, err
	}
	h := cuda.Event(d.handle())
	d.events[h] = &eventInfo{ctx: c}
	return h, nil
}

func (d *Driver) event(op string, e cuda.Event) (*eventInfo, error) {
	ev := d.events[e]
	if ev == nil {
		return nil, cuda.Check(op, cuda.ErrorInvalidHandle)
	}
	return ev, nil
}

func (d *Driver) EventRecord(c cuda.Context, e cuda.Event, s cuda.Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuEventRecord"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	ev, err := d.event(op, e)
	if err != nil {
		return err
	}
	st, err := d.stream(op, s)
	if err != nil {
		return err
	}
	ev.at, ev.set = time.Now(), true
	ev.gpu, ev.on, ev.rec = st.gpu, st.ctx, markOf(st)
	return nil
}

// EventSynchronize waits until the work before the event's last record is
// done (at once for an event never recorded).
func (d *Driver) EventSynchronize(c cuda.Context, e cuda.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c != 0 {
		if _, err := d.ctx("cuEventSynchronize", c); err != nil {
			return err
		}
	} else if err := d.enter("cuEventSynchronize"); err != nil {
		return err
	} else if ev := d.events[e]; ev != nil {
		if err := d.poisonedAt("cuEventSynchronize", ev.ctx, 0); err != nil {
			return err
		}
	}
	ev, err := d.event("cuEventSynchronize", e)
	if err == nil {
		d.waitFor(ev.rec)
	}
	return err
}

func (d *Driver) EventElapsedMs(c cuda.Context, a, b cuda.Event) (float32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuEventElapsedTime"
	if _, err := d.ctx(op, c); err != nil {
		return 0, err
	}
	ea, err := d.event(op, a)
	if err != nil {
		return 0, err
	}
	eb, err := d.event(op, b)
	if err != nil {
		return 0, err
	}
	if !ea.set || !eb.set {
		return 0, cuda.Check(op, cuda.ErrorNotReady)
	}
	if len(d.durations) > 0 { // modelled GPU time only: deterministic
		return float32((eb.gpu - ea.gpu).Seconds() * 1e3), nil
	}
	return float32(eb.at.Sub(ea.at).Seconds() * 1e3), nil
}

func (d *Driver) EventDestroy(c cuda.Context, e cuda.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuEventDestroy_v2"
	if _, err := d.ctx(op, c); err != nil {
		return err
	}
	if _, err := d.event(op, e); err != nil {
		return err
	}
	delete(d.events, e)
	return nil
}

// ptxRE is the head every PTX module has: comments, then .version, then
// .target (the driver refuses a module without them: CUDA_ERROR_INVALID_PTX
// or _IMAGE).
var ptxRE = regexp.MustCompile(`^(?:\s|//[^\n]*\n|/\*(?s:.*?)\*/)*\.version\s+\d+\.\d+\s+\.target\s+\w+`)

// ErrNotComputed is returned by a launch of a kernel the fake has no Go
// model for (RegisterKernel): the launch is ordered and counted like any
// other, but no memory was written, so its results must not be read.
var ErrNotComputed = errs.ErrNotComputed

var entryRE = regexp.MustCompile(`\.entry\s+([A-Za-z_$][\w$]*)`)

func (d *Driver) ModuleLoadData(c cuda.Context, image []byte) (cuda.Module, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuModuleLoadData"
	if _, err := d.ctx(op, c); err != nil {
		return 0, err
	}
	if !ptxRE.Match(image) || bytes.Count(image, []byte("{")) != bytes.Count(image, []byte("}")) {
		// What ptxas would refuse: no .version then .target before
		// anything else, or unbalanced bodies.
		return 0, cuda.Check(op, cuda.ErrorInvalidImage)
	}
	m := &module{ctx: c, entries: map[string]bool{}, cost: cuda.ModuleCost(len(image))}
	for _, e := range entryRE.FindAllSubmatch(image, -1) {
		m.entries[string(e[1])] = true
	}
	h := cuda.Module(d.handle())
	d.modules[h] = m
	return h, nil
}

func (d *Driver) ModuleUnload(c cuda.Context, m cuda.Module) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.ctx("cuModuleUnload", c); err != nil {
		return err
	}
	if d.modules[m] == nil {
		return cuda.Check("cuModuleUnload", cuda.ErrorInvalidHandle)
	}
	mod := d.modules[m]
	delete(d.modules, m)
	for h, f := range d.funcs {
		if f.mod == mod {
			delete(d.funcs, h) // its functions die with it, as on the GPU
		}
	}
	return nil
}

func (d *Driver) ModuleGetFunction(c cuda.Context, m cuda.Module, name string) (cuda.Function, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuModuleGetFunction"
	if _, err := d.ctx(op, c); err != nil {
		return 0, err
	}
	mod := d.modules[m]
	if mod == nil {
		return 0, cuda.Check(op, cuda.ErrorInvalidHandle)
	}
	if !mod.entries[name] {
		return 0, cuda.Check(op, cuda.ErrorNotFound)
	}
	h := cuda.Function(d.handle())
	d.funcs[h] = &function{mod: mod, name: name}
	return h, nil
}

func (d *Driver) LaunchKernel(c cuda.Context, f cuda.Function, grid, block cuda.Dim3, shmem uint32, s cuda.Stream, args *cuda.Args) error {
	d.mu.Lock()
	const op = "cuLaunchKernel"
	if err := d.enterStreamCall(op, c, s); err != nil {
		d.mu.Unlock()
		return err
	}
	fn := d.funcs[f]
	if fn == nil {
		d.mu.Unlock()
		return cuda.Check(op, cuda.ErrorInvalidHandle)
	}
	if !d.spec.launchable(grid, block, shmem) {
		d.mu.Unlock()
		return cuda.Check(op, cuda.ErrorInvalidValue)
	}
	st, err := d.stream(op, s)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	if s != 0 && d.family(st.ctx) != d.family(fn.mod.ctx) {
		// A function belongs to the context its module was loaded in, and
		// on the H200 also serves the streams of the device's primary
		// context and of every green context built on it (a module loaded
		// in the primary context ran on a green stream on that green
		// context's SMs: docs/CONTEXTS.md).
		d.mu.Unlock()
		return cuda.Check(op, cuda.ErrorInvalidHandle)
	}
	k := d.kernels[fn.name]
	if k == nil && fn.name == SMIDKernel {
		k = d.smid(d.streamSMs(s))
	}
	var buf []byte
	var offs []uint32
	if args != nil {
		buf, offs = args.Bytes(), args.Offsets()
	}
	if st.capture != nil {
		st.record(graphOp{name: fn.name, kernel: k, grid: grid, block: block, args: buf, offs: offs})
		d.mu.Unlock()
		return nil
	}
	st.launches++
	d.launches++
	d.modelLaunch(st, fn.name, grid, block)
	holds := d.holdsFor(fn.name, buf, offs)
	if runsNow(st) && len(holds) == 0 {
		// The stream is idle: the kernel runs here, outside the lock, and
		// has run when the launch returns (queue.go).
		seq := d.begin(st)
		d.mu.Unlock()
		if k != nil {
			err = k(&d.mem, grid, block, buf, offs)
		}
		d.mu.Lock()
		if err != nil {
			d.fault(c, s)
		}
		d.end(st, seq)
		d.mu.Unlock()
	} else {
		w := &work{holds: holds}
		if k != nil {
			// It runs after the launch returns: keep its arguments.
			buf, offs = bytes.Clone(buf), slices.Clone(offs)
			w.run = func(mem *Memory) error { return k(mem, grid, block, buf, offs) }
			w.fault = func() { d.fault(c, s) }
		}
		err = d.submit(st, w) // unlocks d.mu
	}
	if err != nil {
		return cuda.Check(op, cuda.ErrorIllegalAddress)
	}
	if k == nil {
		return fmt.Errorf("%s %q: %w", op, fn.name, ErrNotComputed)
	}
	return nil
}

// fault is a kernel's touch of memory no allocation holds, in context c on
// stream s: it faults the device, as on the GPU, and the error is sticky
// (fault.go). The caller holds d.mu.
func (d *Driver) fault(c cuda.Context, s cuda.Stream) {
	if dev, ok := d.devOf(c, s); ok {
		d.poison(dev, cuda.ErrorIllegalAddress)
	}
}

// Resources carry the fake's bookkeeping in the padding the real driver keeps
// for its own: a marker, the split generation and the device.
const (
	offMagic = 4
	offGen   = 8
	offDev   = 16
	magic    = 0x46414b45 // "FAKE"
)

func (d *Driver) makeResource(dev cuda.Device, set smSet, gen uint64) cuda.DevResource {
	sms := uint32(set.count())
	var r cuda.DevResource
	r.SetSM(cuda.SMInfo{Count: sms, MinPartition: d.spec.MinPartition, CoscheduledAlignment: d.spec.Alignment})
	if d.spec.APIVersion < 13000 {
		r.SetSM(cuda.SMInfo{Count: sms})
	}
	binary.LittleEndian.PutUint32(r.Raw[offMagic:], magic)
	binary.LittleEndian.PutUint64(r.Raw[offGen:], gen)
	binary.LittleEndian.PutUint32(r.Raw[offDev:], uint32(dev))
	setResourceSMs(&r, set)
	return r
}

func (d *Driver) DeviceGetDevResource(dev cuda.Device, t cuda.ResourceType) (cuda.DevResource, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuDeviceGetDevResource"
	if err := d.enter(op); err != nil {
		return cuda.DevResource{}, err
	}
	if err := d.device(op, dev); err != nil {
		return cuda.DevResource{}, err
	}
	if t != cuda.ResourceSM {
		return cuda.DevResource{}, cuda.Check(op, cuda.ErrorInvalidResourceType)
	}
	return d.makeResource(dev, allSMs(d.spec.SMs), 0), nil
}

func validResource(r *cuda.DevResource) bool {
	return r.Type() == cuda.ResourceSM && binary.LittleEndian.Uint32(r.Raw[offMagic:]) == magic
}

func (d *Driver) DevSmResourceSplitByCount(input cuda.DevResource, flags, minCount uint32, maxGroups int) ([]cuda.DevResource, cuda.DevResource, int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuDevSmResourceSplitByCount"
	var none cuda.DevResource
	if err := d.enter(op); err != nil {
		return nil, none, 0, err
	}
	if !validResource(&input) {
		return nil, none, 0, cuda.Check(op, cuda.ErrorInvalidResourceType)
	}
	if flags&^(cuda.SplitIgnoreCoscheduling|cuda.SplitMaxClusterSize) != 0 || minCount == 0 {
		return nil, none, 0, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	if minCount > input.SMCount() {
		return nil, none, 0, cuda.Check(op, cuda.ErrorInvalidResourceConfig)
	}
	n := d.spec.splitCount(input.SMCount(), minCount, flags)
	if maxGroups <= 0 {
		return nil, none, n, nil
	}
	n = min(n, maxGroups)
	d.splitGen++
	dev := cuda.Device(binary.LittleEndian.Uint32(input.Raw[offDev:]))
	size := d.spec.groupSize(input.SMCount(), minCount, flags)
	// Each group takes the next size SMs of the input; the remainder what
	// is left (sms.go).
	ids := resourceSMs(&input).list()
	groups := make([]cuda.DevResource, n)
	for i := range groups {
		var set smSet
		for _, id := range ids[i*int(size) : (i+1)*int(size)] {
			set.add(id)
		}
		groups[i] = d.makeResource(dev, set, d.splitGen)
	}
	var rest smSet
	for _, id := range ids[n*int(size):] {
		rest.add(id)
	}
	rem := d.makeResource(dev, rest, d.splitGen)
	return groups, rem, n, nil
}

func (d *Driver) DevResourceGenerateDesc(res []cuda.DevResource) (cuda.ResourceDesc, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuDevResourceGenerateDesc"
	if err := d.enter(op); err != nil {
		return 0, err
	}
	if len(res) == 0 {
		return 0, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	var sms uint32
	var set smSet
	gen := binary.LittleEndian.Uint64(res[0].Raw[offGen:])
	for i := range res {
		if !validResource(&res[i]) {
			return 0, cuda.Check(op, cuda.ErrorInvalidResourceType)
		}
		// The driver insists that the groups of one descriptor come from
		// one split.
		if binary.LittleEndian.Uint64(res[i].Raw[offGen:]) != gen {
			return 0, cuda.Check(op, cuda.ErrorInvalidResourceConfig)
		}
		sms += res[i].SMCount()
		set = set.union(resourceSMs(&res[i]))
	}
	if sms > d.spec.SMs || sms == 0 {
		return 0, cuda.Check(op, cuda.ErrorInvalidResourceConfig)
	}
	h := cuda.ResourceDesc(d.handle())
	d.descs[h] = descInfo{sms: sms, set: set}
	return h, nil
}

func (d *Driver) GreenCtxCreate(desc cuda.ResourceDesc, dev cuda.Device, flags uint32) (cuda.GreenCtx, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuGreenCtxCreate"
	if err := d.enter(op); err != nil {
		return 0, err
	}
	if err := d.device(op, dev); err != nil {
		return 0, err
	}
	if err := d.poisoned(op, dev); err != nil {
		return 0, err
	}
	info, ok := d.descs[desc]
	if !ok {
		return 0, cuda.Check(op, cuda.ErrorInvalidHandle)
	}
	if flags != cuda.GreenCtxDefaultStream {
		return 0, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	if p := d.primary[dev]; p != nil && p.refs > 0 {
		p.kept += GreenCtxCost
	}
	g := &green{handle: cuda.GreenCtx(d.handle()), sms: info.sms, set: info.set}
	g.res = d.makeResource(dev, info.set, 0)
	g.ctx = cuda.Context(d.handle())
	d.contexts[g.ctx] = &context{dev: dev, green: g}
	d.greens[g.handle] = g
	return g.handle, nil
}

func (d *Driver) green(op string, h cuda.GreenCtx) (*green, error) {
	if err := d.enter(op); err != nil {
		return nil, err
	}
	g := d.greens[h]
	if g == nil || g.destroyed {
		return nil, cuda.Check(op, cuda.ErrorInvalidHandle)
	}
	return g, nil
}

func (d *Driver) GreenCtxDestroy(h cuda.GreenCtx) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, err := d.green("cuGreenCtxDestroy", h)
	if err != nil {
		return err
	}
	g.destroyed = true
	d.contexts[g.ctx].destroyed = true
	// cuGreenCtxDestroy does not destroy the green context's streams
	// (the driver API's documentation): they stay, detached, holding what
	// they hold, until cuStreamDestroy, so Live counts them and a caller
	// that forgets one leaks it here as on the device.
	for _, st := range d.streams {
		if st.ctx == g.ctx {
			st.detached = true
		}
	}
	return nil
}

func (d *Driver) CtxFromGreenCtx(h cuda.GreenCtx) (cuda.Context, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, err := d.green("cuCtxFromGreenCtx", h)
	if err != nil {
		return 0, err
	}
	if err := d.poisonedAt("cuCtxFromGreenCtx", g.ctx, 0); err != nil {
		return 0, err
	}
	return g.ctx, nil
}

func (d *Driver) GreenCtxStreamCreate(h cuda.GreenCtx, flags uint32, priority int) (cuda.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuGreenCtxStreamCreate"
	g, err := d.green(op, h)
	if err != nil {
		return 0, err
	}
	if err := d.poisonedAt(op, g.ctx, 0); err != nil {
		return 0, err
	}
	if flags != cuda.StreamNonBlocking {
		return 0, cuda.Check(op, cuda.ErrorInvalidValue)
	}
	s := cuda.Stream(d.handle())
	d.streams[s] = &streamInfo{ctx: g.ctx, prio: min(max(priority, GreatestPriority), 0)}
	return s, nil
}

// GreatestPriority is the simulated device's greatest stream priority, its
// least 0 (a range assumed, not measured: testdata/probes/growprio.cu
// prints a GPU's). The driver clamps a priority outside it to its end.
const GreatestPriority = -5

// StreamPriority is the priority stream s was made at, as the driver
// clamped it; false for a stream it does not know.
func (d *Driver) StreamPriority(s cuda.Stream) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.streams[s]
	if st == nil {
		return 0, false
	}
	return st.prio, true
}

func (d *Driver) GreenCtxGetDevResource(h cuda.GreenCtx, t cuda.ResourceType) (cuda.DevResource, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	const op = "cuGreenCtxGetDevResource"
	g, err := d.green(op, h)
	if err != nil {
		return cuda.DevResource{}, err
	}
	if t != cuda.ResourceSM {
		return cuda.DevResource{}, cuda.Check(op, cuda.ErrorInvalidResourceType)
	}
	return g.res, nil
}

// entry points added for branch whole

// StreamWaitEvent makes the work issued on s from now on wait until the
// event's last record is reached (at once where it is already).
func (d *Driver) StreamWaitEvent(c cuda.Context, s cuda.Stream, e cuda.Event) error {
	d.mu.Lock()
	const op = "cuStreamWaitEvent"
	if c != 0 || s == 0 {
		if _, err := d.ctx(op, c); err != nil {
			d.mu.Unlock()
			return err
		}
	} else if err := d.enter(op); err != nil {
		d.mu.Unlock()
		return err
	}
	st, err := d.stream(op, s)
	if err != nil {
		d.mu.Unlock()
		return err
	}
	ev, err := d.event(op, e)
	if err != nil || ev.rec.reached() || st.capture != nil {
		d.mu.Unlock()
		return err
	}
	m := ev.rec
	return d.submit(st, &work{wait: &m}) // unlocks d.mu
}

var _ cuda.Driver = (*Driver)(nil)

func (s Spec) String() string { return fmt.Sprintf("%s: %d SMs", s.Name, s.SMs) }

// OpenPrimary is a fake of spec with device 0's primary context retained and
// a non-blocking stream made in it: what a unit test of an engine that is
// handed a driver, a context and a stream starts from.
func OpenPrimary(spec Spec) (*Driver, cuda.Context, cuda.Stream, error) {
	d := New(spec)
	dev, err := d.DeviceGet(0)
	if err != nil {
		return nil, 0, 0, err
	}
	ctx, err := d.PrimaryCtxRetain(dev)
	if err != nil {
		return nil, 0, 0, err
	}
	s, err := d.StreamCreate(ctx, cuda.StreamNonBlocking)
	return d, ctx, s, err
}
