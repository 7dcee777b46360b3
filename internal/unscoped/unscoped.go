// Package unscoped learns whether the driver takes a stream's calls with no
// context current (the stream naming its context) and runs them so where
// it does. Where it does, a partitioned tenant's launches, waits and
// stream-ordered pool calls need not take one of its green contexts (each
// current on one thread at a time), so that one request's Synchronize does
// not hold up another's launch. Where it does not, they run in a context
// any number of threads may have current, the primary context, which
// serves a green stream's calls too (docs/CONTEXTS.md).
//
// It was written three times (internal/place's launches and waits, and
// internal/devmem's pool calls, each with the states as constants of
// devmem's); it is one Probe per kind of call now, kept by the pool.
package unscoped

import (
	"errors"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
)

// State is what a Probe has learned.
type State int32

const (
	Unknown State = iota // no call has been made yet
	Yes                  // the driver takes the calls with no context current
	No                   // the driver wants a context current
)

func (s State) String() string {
	switch s {
	case Yes:
		return "yes"
	case No:
		return "no"
	}
	return "unknown"
}

// Probe is what the driver answered one kind of call, learned on the
// first and kept for every later one. The zero Probe has learned nothing;
// it is safe for concurrent use.
type Probe struct{ state atomic.Int32 }

// State is what p has learned.
func (p *Probe) State() State { return State(p.state.Load()) }

// Yes reports whether the driver is known to take the calls with no
// context current: a caller's fast path, which makes no closure.
func (p *Probe) Yes() bool { return p.state.Load() == int32(Yes) }

// Refusal is the notice told hears, once per Probe, when the driver turns
// out to want a context current.
const Refusal = "driver needs a current context for calls on a green stream; using the primary context"

// Do runs f with no context current (ctx 0) where the driver takes that,
// else with fallback, a context any thread may have current. Until the
// driver has answered, f runs with none; a refusal (CUDA_ERROR_INVALID_CONTEXT
// or CUDA_ERROR_INVALID_HANDLE) is learned, told (Refusal, once), and f runs
// again with fallback. Any other error is f's, and teaches nothing. The
// caller is counted in the tenant's life lock: f must not count itself in
// again (a Reshape's pause between the two entries would wait for it).
func (p *Probe) Do(fallback cuda.Context, told func(msg string), f func(ctx cuda.Context) error) error {
	switch State(p.state.Load()) {
	case Yes:
		return f(0)
	case No:
		return f(fallback)
	}
	err := f(0)
	switch {
	case err == nil:
		p.state.CompareAndSwap(int32(Unknown), int32(Yes))
	case errors.Is(err, cuda.ErrorInvalidContext), errors.Is(err, cuda.ErrorInvalidHandle):
		if p.state.CompareAndSwap(int32(Unknown), int32(No)) && told != nil {
			told(Refusal)
		}
		return f(fallback)
	}
	return err
}
