package fcsp

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// The fault domain of a green context is the process, not the partition: a
// kernel that faults (an illegal address, say) on one tenant's SMs leaves a
// sticky error that every context of the device in this process answers
// from then on. So the pool recognises a sticky error once, in one place (a
// decorator around the driver), turns the pool to lost, and from then on
// answers every tenant's call with the same *DeviceLostError without
// calling the driver, until Reset.

// DeviceLostError is a sticky device error as the pool first saw it.
// errors.Is(err, ErrDeviceLost) holds, and errors.As gives the *CUDAError.
type DeviceLostError struct {
	Err    *CUDAError // the driver's sticky error (nil while a Reset of a healthy pool runs)
	Tenant string     // the tenant whose call saw it first ("" if none could be named)
	Stream uintptr    // the stream that call named (0: none)
	At     time.Time
	// NeedsRestart: a Pool.Reset found that the driver keeps the fault
	// (as the H200 does for sticky errors); only a new process can use the
	// device again.
	NeedsRestart bool
	reason       string
}

func (e *DeviceLostError) Error() string {
	if e.reason != "" {
		return "fcsp: device lost: " + e.reason
	}
	where := "outside any tenant"
	if e.Tenant != "" {
		where = fmt.Sprintf("by tenant %q", e.Tenant)
	}
	if e.Stream != 0 {
		where += fmt.Sprintf(" on stream %#x", e.Stream)
	}
	return fmt.Sprintf("fcsp: device lost: %v, first seen %s at %s; every tenant of this process shares the fault (a real driver keeps it until the process exits)",
		e.Err, where, e.At.Format(time.RFC3339Nano))
}

// Unwrap gives ErrDeviceLost and the driver's error.
func (e *DeviceLostError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrDeviceLost}
	}
	return []error{ErrDeviceLost, e.Err}
}

// Health is the pool's fault state.
type Health struct {
	// Lost is the sticky error that poisoned the device, nil while it is
	// healthy.
	Lost *DeviceLostError
	// Resets counts successful Pool.Reset calls; LastReset is the last
	// one's duration.
	Resets    int
	LastReset time.Duration
	// NeedsRestart: the device is lost for this process; Reset cannot
	// bring it back, a restart of the process can.
	NeedsRestart bool
}

// Healthy reports whether the pool serves.
func (h Health) Healthy() bool { return h.Lost == nil }

// Health reports whether the device is lost, and the resets so far.
func (p *Pool) Health() Health {
	lost := p.fault.lost.Load()
	return Health{Lost: lost, Resets: int(p.fault.resets.Load()), LastReset: time.Duration(p.fault.lastReset.Load()),
		NeedsRestart: lost != nil && lost.NeedsRestart}
}

// faultState is the pool's part of all this.
type faultState struct {
	raw       cuda.Driver // the driver itself: greenctx and Reset call it
	lost      atomic.Pointer[DeviceLostError]
	gen       atomic.Uint64 // resets so far: events record theirs
	resets    atomic.Int64
	lastReset atomic.Int64 // nanoseconds
	// resetMu orders Reset against tenant Close: a Close holds it shared
	// for its whole length, Reset exclusively.
	resetMu sync.RWMutex
	// stale holds, per tenant, the pointers that died with the last reset,
	// so that their Free says ErrStale rather than ErrUnknownPointer.
	stale sync.Map // staleKey -> struct{}
}

type staleKey struct {
	c *tenantCore
	p DevicePtr
}

// err is the lost error, or nil.
func (f *faultState) err() error {
	if e := f.lost.Load(); e != nil {
		return e
	}
	return nil
}

// forgive drops the errors of cleaning up a lost device: its resources died
// with its contexts, and the driver says so in many ways.
func (p *Pool) forgive(err error) error {
	if err != nil && p.fault.lost.Load() == nil {
		// A cleanup through the raw driver (a partition's streams) may be
		// the first to meet a sticky fault: it loses the device as any
		// call would, rather than failing the Close.
		if ce := stickyIn(err); ce != nil {
			_ = p.see(ce, 0, 0)
		}
	}
	if err != nil && p.fault.lost.Load() != nil {
		p.log.Debug("fcsp: cleanup on a lost device", "err", err)
		return nil
	}
	return err
}

// stickyIn is the first sticky driver error in err's tree, or nil.
func stickyIn(err error) *cuda.Error {
	switch e := err.(type) {
	case *cuda.Error:
		if e.Code.Sticky() {
			return e
		}
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if ce := stickyIn(x); ce != nil {
				return ce
			}
		}
	case interface{ Unwrap() error }:
		return stickyIn(e.Unwrap())
	}
	return nil
}

// see classifies a driver error: a sticky one turns the pool to lost (the
// first one is kept) and is answered with the pool's *DeviceLostError.
func (p *Pool) see(err error, ctx cuda.Context, s cuda.Stream) error {
	if err == nil {
		return nil // before ce: its address escapes, so declaring it allocates
	}
	var ce *cuda.Error
	if !errors.As(err, &ce) || !ce.Code.Sticky() {
		return err
	}
	e := &DeviceLostError{Err: ce, Stream: uintptr(s), At: time.Now()}
	e.Tenant = p.whose(ctx, s)
	if p.fault.lost.CompareAndSwap(nil, e) {
		p.log.Error("fcsp: device lost: every tenant's calls fail; on a real driver only a new process can use the device again", "err", e.Err, "tenant", e.Tenant, "stream", fmt.Sprintf("%#x", e.Stream))
		return e
	}
	return p.fault.err()
}

// whose names the tenant that owns stream s, or partition context ctx. It
// only tries the locks: a caller may hold them (NewTenant holds the pool's),
// and then the name is left out rather than waited for.
func (p *Pool) whose(ctx cuda.Context, s cuda.Stream) string {
	if !p.mu.TryLock() {
		return ""
	}
	defer p.mu.Unlock()
	for name, c := range p.tenants {
		if s != 0 && c.mu.TryLock() {
			for _, st := range c.streams {
				if st.h() == s {
					c.mu.Unlock()
					return name
				}
			}
			c.mu.Unlock()
		}
		if c.part != nil && ctx != 0 && c.part.Context() == ctx {
			return name
		}
	}
	return ""
}

// watched is the driver as tenants see it: lost is answered without a call,
// a sticky error turns the pool to lost.
type watched struct {
	cuda.Driver
	p *Pool
}

func (w *watched) refuse() error { return w.p.fault.err() }

func (w *watched) MemAlloc(c cuda.Context, n uint64) (cuda.DevicePtr, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.MemAlloc(c, n)
	return v, w.p.see(err, c, 0)
}

func (w *watched) MemFree(c cuda.Context, d cuda.DevicePtr) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.MemFree(c, d), c, 0)
}

func (w *watched) MemGetInfo(c cuda.Context) (uint64, uint64, error) {
	if err := w.refuse(); err != nil {
		return 0, 0, err
	}
	f, t, err := w.Driver.MemGetInfo(c)
	return f, t, w.p.see(err, c, 0)
}

func (w *watched) MemcpyHtoD(c cuda.Context, dst cuda.DevicePtr, src []byte) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.MemcpyHtoD(c, dst, src), c, 0)
}

func (w *watched) MemcpyDtoH(c cuda.Context, dst []byte, src cuda.DevicePtr) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.MemcpyDtoH(c, dst, src), c, 0)
}

func (w *watched) StreamCreate(c cuda.Context, flags uint32) (cuda.Stream, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.StreamCreate(c, flags)
	return v, w.p.see(err, c, 0)
}

func (w *watched) StreamDestroy(c cuda.Context, s cuda.Stream) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.StreamDestroy(c, s), c, s)
}

func (w *watched) StreamSynchronize(c cuda.Context, s cuda.Stream) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.StreamSynchronize(c, s), c, s)
}

func (w *watched) EventCreate(c cuda.Context, flags uint32) (cuda.Event, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.EventCreate(c, flags)
	return v, w.p.see(err, c, 0)
}

func (w *watched) EventRecord(c cuda.Context, e cuda.Event, s cuda.Stream) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.EventRecord(c, e, s), c, s)
}

func (w *watched) EventSynchronize(c cuda.Context, e cuda.Event) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.EventSynchronize(c, e), c, 0)
}

func (w *watched) EventElapsedMs(c cuda.Context, a, b cuda.Event) (float32, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.EventElapsedMs(c, a, b)
	return v, w.p.see(err, c, 0)
}

func (w *watched) EventDestroy(c cuda.Context, e cuda.Event) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.EventDestroy(c, e), c, 0)
}

func (w *watched) ModuleLoadData(c cuda.Context, image []byte) (cuda.Module, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.ModuleLoadData(c, image)
	return v, w.p.see(err, c, 0)
}

func (w *watched) ModuleUnload(c cuda.Context, m cuda.Module) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.ModuleUnload(c, m), c, 0)
}

func (w *watched) ModuleGetFunction(c cuda.Context, m cuda.Module, name string) (cuda.Function, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.ModuleGetFunction(c, m, name)
	return v, w.p.see(err, c, 0)
}

func (w *watched) LaunchKernel(c cuda.Context, f cuda.Function, grid, block cuda.Dim3, shmem uint32, s cuda.Stream, args *cuda.Args) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.LaunchKernel(c, f, grid, block, shmem, s, args), c, s)
}

func (w *watched) MemPoolCreate(c cuda.Context, d cuda.Device, maxSize uint64) (cuda.MemPool, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.MemPoolCreate(c, d, maxSize)
	return v, w.p.see(err, c, 0)
}

func (w *watched) MemPoolDestroy(c cuda.Context, m cuda.MemPool) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.MemPoolDestroy(c, m), c, 0)
}

func (w *watched) MemAllocFromPoolAsync(c cuda.Context, n uint64, m cuda.MemPool, s cuda.Stream) (cuda.DevicePtr, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.MemAllocFromPoolAsync(c, n, m, s)
	return v, w.p.see(err, c, s)
}

func (w *watched) MemFreeAsync(c cuda.Context, d cuda.DevicePtr, s cuda.Stream) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.MemFreeAsync(c, d, s), c, s)
}

func (w *watched) MemPoolTrimTo(c cuda.Context, m cuda.MemPool, keep uint64) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.MemPoolTrimTo(c, m, keep), c, 0)
}

func (w *watched) MemPoolSetAttribute(c cuda.Context, m cuda.MemPool, a cuda.PoolAttribute, v uint64) error {
	if err := w.refuse(); err != nil {
		return err
	}
	return w.p.see(w.Driver.MemPoolSetAttribute(c, m, a, v), c, 0)
}

func (w *watched) MemPoolGetAttribute(c cuda.Context, m cuda.MemPool, a cuda.PoolAttribute) (uint64, error) {
	if err := w.refuse(); err != nil {
		return 0, err
	}
	v, err := w.Driver.MemPoolGetAttribute(c, m, a)
	return v, w.p.see(err, c, 0)
}
