package cuda

// What the driver's objects cost in device memory: the SDK charges them
// against a pool's device limit (internal/overhead) and the fake driver
// holds them, so that the accounting has tests without a GPU. Defined once,
// for both. A figure marked "model" was not measured object by object;
// fcsp's TestGPUObjectCosts measures each on a GPU.
const (
	// GreenCtxCost is measured: 4 MiB per cuGreenCtxCreate on an H100
	// (driver 580, bare driver calls; docs/BENCHMARKS.md run UU), which
	// cuGreenCtxDestroy does not give back while the device's primary
	// context is retained.
	GreenCtxCost uint64 = 4 << 20
	// StreamCost is a model: 16 plain tenants (a stream and a memory pool
	// each) raised the driver's used memory by 8 MiB on an H100 (534 to
	// 542 MiB, driver 580), which is charged to their streams.
	StreamCost uint64 = 512 << 10
	// EventCost is a model: nothing measured has shown an event's memory,
	// so it is counted but not charged.
	EventCost uint64 = 0
	// ModulePage is a model: a loaded module is charged its image rounded
	// up to it, the page in which the driver maps code.
	ModulePage uint64 = 2 << 20
)

// ModuleCost is what a module loaded from an image of n bytes is charged:
// n rounded up to ModulePage, one page at least.
func ModuleCost(n int) uint64 {
	return max(1, (uint64(n)+ModulePage-1)/ModulePage) * ModulePage
}

// Object is a kind of driver object whose device memory the SDK counts.
type Object uint8

const (
	ObjGreenCtx Object = iota + 1
	ObjStream
	ObjEvent
	ObjModule
)

// Maker is told of the objects a Guard's calls make and destroy
// (Guard.SetMaker; internal/overhead counts their memory). Only the calls
// that make or destroy one ask it, so the others cost nothing more. Make
// is asked before the driver, and its error is the call's (the driver is
// not asked); Made is told how it went (h: the new handle, 0 on an
// error); Unmade that h is being destroyed. n is a module's image size,
// 0 for the others.
type Maker interface {
	Make(o Object, n int) error
	Made(o Object, h uintptr, n int, err error)
	Unmade(o Object, h uintptr)
}
