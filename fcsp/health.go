package fcsp

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// The fault domain of a green context is the process, not the partition: a
// kernel that faults (an illegal address, say) on one tenant's SMs leaves a
// sticky error that every context of the device in this process answers
// from then on. So the pool recognises a sticky error once, in one place (a
// decorator around the driver, cuda.Guard, generated from the binding's
// table so that it covers every method), turns the pool to lost, and from
// then on answers every call with the same *DeviceLostError without calling
// the driver. There is no way back in-process: on the H200 a sticky fault
// survives the reset of the primary context, so the process must exit and
// a supervisor start a new one (Health.RestartRequired).

// DeviceLostError is a sticky device error as the pool first saw it.
// errors.Is(err, ErrDeviceLost) holds, and errors.As gives the *CUDAError.
type DeviceLostError struct {
	Err    *CUDAError // the driver's sticky error
	Op     string     // the driver call that answered it first (e.g. "cuGraphLaunch")
	Tenant string     // the tenant whose call saw it first ("" if none could be named)
	Stream uintptr    // the stream that call named (0: none)
	At     time.Time  // when the pool first saw it
}

func (e *DeviceLostError) Error() string {
	where := "outside any tenant"
	if e.Tenant != "" {
		where = fmt.Sprintf("by tenant %q", e.Tenant)
	}
	if e.Stream != 0 {
		where += fmt.Sprintf(" on stream %#x", e.Stream)
	}
	return fmt.Sprintf("fcsp: device lost: %v from %s, first seen %s at %s; every tenant of this process shares the fault and the driver keeps it until the process exits: restart the process",
		e.Err, e.Op, where, e.At.Format(time.RFC3339Nano))
}

// Unwrap gives ErrDeviceLost and the driver's error.
func (e *DeviceLostError) Unwrap() []error {
	return []error{ErrDeviceLost, e.Err}
}

// Health is the pool's fault state.
type Health struct {
	// Lost is the sticky error that poisoned the device, nil while it is
	// healthy: which error, from which call, when (Lost.At), and which
	// tenant and stream saw it first.
	Lost *DeviceLostError
	// RestartRequired is Lost != nil, said once more for a supervisor: a
	// lost device never comes back in this process (the driver keeps a
	// sticky fault until the process exits), so a liveness probe should
	// fail and the process be replaced. Close the pool first: it still
	// frees what it made.
	RestartRequired bool
}

// Healthy reports whether the pool serves.
func (h Health) Healthy() bool { return h.Lost == nil }

// Health reports whether the device is lost.
func (p *Pool) Health() Health {
	lost := p.fault.lost.Load()
	return Health{Lost: lost, RestartRequired: lost != nil}
}

// faultState is the pool's part of all this.
type faultState struct {
	lost atomic.Pointer[DeviceLostError]
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
		if ce := cuda.StickyIn(err); ce != nil {
			_ = p.see("cleanup", ce, 0, 0)
		}
	}
	if err != nil && p.fault.lost.Load() != nil {
		p.log.Debug("fcsp: cleanup on a lost device", "err", err)
		return nil
	}
	return err
}

// see classifies a driver error: a sticky one turns the pool to lost (the
// first one is kept) and is answered with the pool's *DeviceLostError.
func (p *Pool) see(op string, err error, ctx cuda.Context, s cuda.Stream) error {
	ce := cuda.AsError(err) // not errors.As, whose target escapes: a poll's "not ready" passes here
	if ce == nil || !ce.Code.Sticky() {
		return err
	}
	e := &DeviceLostError{Err: ce, Op: op, Stream: uintptr(s), At: time.Now()}
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
		if c.place.isContext(ctx) {
			return name
		}
	}
	return ""
}

// watch is the pool's cuda.Watcher: every driver call of the pool, its
// tenants and greenctx goes through a cuda.Guard that asks it.
type watch struct{ p *Pool }

// Refuse answers a lost pool's calls without the driver. (Release calls
// are not asked: closing a lost pool still frees what it made.)
func (w watch) Refuse(string) error { return w.p.fault.err() }

// See turns a sticky error into the pool's *DeviceLostError.
func (w watch) See(op string, c cuda.Context, s cuda.Stream, err error) error {
	return w.p.see(op, err, c, s)
}
