// Package fault keeps a pool's fault state.
//
// The fault domain of a green context is the process, not the partition: a
// kernel that faults (an illegal address, say) on one tenant's SMs leaves a
// sticky error that every context of the device in this process answers
// from then on. So the pool recognises a sticky error once, in one place (a
// decorator around the driver, cuda.Guard, generated from the binding's
// table so that it covers every method, with a State as its watcher),
// turns the pool to lost, and from then on answers every call with the
// same error without calling the driver. There is no way back in-process:
// on the H200 a sticky fault survives the reset of the primary context, so
// the process must exit and a supervisor start a new one.
package fault

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// Record is a sticky device error as the pool first saw it. fcsp's
// DeviceLostError has the same fields, so that each converts to the other,
// and says it (its Error: the public face names tenants, not the engines).
type Record struct {
	Err    *cuda.Error // the driver's sticky error
	Op     string      // the driver call that answered it first (e.g. "cuGraphLaunch")
	Tenant string      // the tenant whose call saw it first ("" if none could be named)
	Stream uintptr     // the stream that call named (0: none)
	At     time.Time   // when the pool first saw it
}

// State is a pool's fault state: healthy, or lost with the first sticky
// error it saw, which it answers as Public made it (fcsp's
// *DeviceLostError) from then on. It is the pool's cuda.Watcher: every
// driver call of the pool, its tenants and internal/smpart goes through a
// cuda.Guard that asks it. (It is not generic over the public error: the
// guard asks it through an interface on every driver call, where a generic
// State's dictionary cost a Refuse and See pair 12.0 ns against 9.2,
// medians of 12 interleaved BenchmarkWatch runs on a shared 2-core host.)
//
// Public, Whose and Log are set before the first call the guard passes and
// not changed after.
type State struct {
	lost atomic.Pointer[error]

	// Public makes the error a lost pool answers with.
	Public func(Record) error
	// Whose names the tenant that owns stream s, or context c ("" if
	// none can be named). It must not wait for a lock: the call that
	// meets the fault may hold it.
	Whose func(c cuda.Context, s cuda.Stream) string
	Log   *slog.Logger
}

// Err is the lost error, or nil.
func (f *State) Err() error {
	if e := f.lost.Load(); e != nil {
		return *e
	}
	return nil
}

// Refuse answers a lost pool's calls without the driver. (Release calls
// are not asked: closing a lost pool still frees what it made.)
func (f *State) Refuse(string) error { return f.Err() }

// See classifies a driver error: a sticky one turns the pool to lost (the
// first one is kept) and is answered with the pool's lost error.
func (f *State) See(op string, c cuda.Context, s cuda.Stream, err error) error {
	ce := cuda.AsError(err) // not errors.As, whose target escapes: a poll's "not ready" passes here
	if ce == nil || !ce.Code.Sticky() {
		return err
	}
	r := Record{Err: ce, Op: op, Stream: uintptr(s), At: time.Now()}
	r.Tenant = f.Whose(c, s)
	e := f.Public(r)
	if f.lost.CompareAndSwap(nil, &e) {
		f.Log.Error("fcsp: device lost: every tenant's calls fail; on a real driver only a new process can use the device again", "err", r.Err, "tenant", r.Tenant, "stream", fmt.Sprintf("%#x", r.Stream))
		return e
	}
	return f.Err()
}

// Forgive drops the errors of cleaning up a lost device: its resources died
// with its contexts, and the driver says so in many ways.
func (f *State) Forgive(err error) error {
	if err != nil && f.lost.Load() == nil {
		// A cleanup through the raw driver (a partition's streams) may be
		// the first to meet a sticky fault: it loses the device as any
		// call would, rather than failing the Close.
		if ce := cuda.StickyIn(err); ce != nil {
			_ = f.See("cleanup", 0, 0, ce)
		}
	}
	if err != nil && f.lost.Load() != nil {
		f.Log.Debug("fcsp: cleanup on a lost device", "err", err)
		return nil
	}
	return err
}
