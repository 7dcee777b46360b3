// Package overhead counts the device memory a pool's own objects hold
// (green contexts, streams, events, modules) and charges it against the
// pool's device limit, so that a pool under a limit keeps what the device
// sees of the process within it, rather than the tenants' allocations
// alone (issue 54: a latency class of 16-48 SMs warmed with 16 Dos per
// size is 80 green contexts, 320 MiB at 4 MiB each, which no quota saw).
//
// The Meter is the pool's guard's cuda.Maker: the guard, which every
// driver call of the pool passes, tells it of each object made and
// destroyed (only those calls ask it), whichever engine or mechanism makes
// it, so no call site counts. A creation is charged before the driver is
// asked and refused, changing nothing, where the limit has no room for it
// (a *memtrack.QuotaError, errs.ErrQuotaExceeded) or where it would pass
// the pool's bound on green contexts (errs.ErrGreenContextLimit).
//
// What each object costs is internal/cuda's table (cuda.GreenCtxCost
// measured, the others models). A green context's memory stays charged
// after it is destroyed: the driver keeps it while the device's primary
// context lives, so the pool is charged each one it made until it closes.
// Green contexts the process kept from another pool of the device, and
// then reused, are that pool's (the one that made them).
package overhead

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/fcsp-go/fcsp-go/internal/bytesize"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// kind is a sort of object the meter counts.
type kind int

const (
	green kind = iota
	stream
	event
	module
	kinds
)

var kindNames = [kinds]string{"green context", "stream", "event", "module"}

// Meter is one pool's count of its objects and their memory. Its zero
// value counts, charges nothing and bounds nothing. Safe for concurrent
// use.
type Meter struct {
	// limit bounds the green contexts made (0: none); set before the
	// first creation (SetGreenLimit).
	limit int64
	t     atomic.Pointer[memtrack.Tracker] // the device limit, once bound
	made  atomic.Int64                     // green contexts made (never less: see the package doc)
	live  [kinds]atomic.Int64              // objects alive
	bytes [kinds]atomic.Uint64             // their memory (a green context's outlives it)

	mu   sync.Mutex         // guards mods; a leaf: nothing is taken or called under it
	mods map[uintptr]uint64 // modules' costs by handle
}

// SetGreenLimit bounds the green contexts the meter lets the pool make
// (n > 0), before the pool makes any.
func (m *Meter) SetGreenLimit(n int) { m.limit = int64(n) }

// Bind charges what the pool made so far against t, the device limit, and
// every later object as it is made. Call it once, before the pool is
// shared. A limit that has no room for what was made is its
// *memtrack.QuotaError.
func (m *Meter) Bind(t *memtrack.Tracker) error {
	if n := m.Bytes(); n > 0 {
		if err := t.ReserveDevice(n); err != nil {
			return fmt.Errorf("fcsp: the device limit has no room for the %s the SDK's own objects took at Open: %w", bytesize.Format(n), err)
		}
	}
	m.t.Store(t)
	return nil
}

// Bytes is the memory the pool's objects hold, charged against the device
// limit once bound.
func (m *Meter) Bytes() (n uint64) {
	for k := range kinds {
		n += m.bytes[k].Load()
	}
	return n
}

// Charged is what the meter holds of the device limit: Bytes once bound.
func (m *Meter) Charged() uint64 {
	if m.t.Load() == nil {
		return 0
	}
	return m.Bytes()
}

// Figures is what the meter counts, by kind (fcsp's Overhead has the same
// fields; GreenKept is the caller's to fill, from the device's shelf).
type Figures struct {
	Bytes                                   uint64
	GreenContexts, Streams, Events, Modules uint64
	GreenMade, GreenLive, GreenKept         int
	GreenLimit                              int
	StreamsLive, EventsLive, ModulesLive    int
}

// Read returns the meter's figures now.
func (m *Meter) Read() Figures {
	f := Figures{
		GreenContexts: m.bytes[green].Load(), Streams: m.bytes[stream].Load(),
		Events: m.bytes[event].Load(), Modules: m.bytes[module].Load(),
		GreenMade: int(m.made.Load()), GreenLive: int(m.live[green].Load()), GreenLimit: int(m.limit),
		StreamsLive: int(m.live[stream].Load()), EventsLive: int(m.live[event].Load()), ModulesLive: int(m.live[module].Load()),
	}
	f.Bytes = f.GreenContexts + f.Streams + f.Events + f.Modules
	return f
}

// take counts one object of kind k costing n bytes, charging the device
// limit where bound; an error refuses it, having changed nothing.
func (m *Meter) take(k kind, n uint64) error {
	if k == green {
		if made := m.made.Add(1); m.limit > 0 && made > m.limit {
			m.made.Add(-1)
			return fmt.Errorf("%w: the pool has made %d, its WithGreenContextLimit; each holds %s of device memory while the pool is open, "+
				"reused or not. Raise the limit, or configure fewer: a partition makes one per size it may take (WithReshapeSizes, "+
				"WithLatencyTarget's range) and up to WithConcurrentDos per size in use, warmed all at once with WithWarmup",
				errs.ErrGreenContextLimit, m.limit, bytesize.Format(cuda.GreenCtxCost))
		}
	}
	if t := m.t.Load(); t != nil && n > 0 {
		if err := t.ReserveDevice(n); err != nil {
			var qe *memtrack.QuotaError
			if errors.As(err, &qe) {
				if k == green {
					m.made.Add(-1)
				}
				return fmt.Errorf("fcsp: a %s holds %s of device memory, which the device limit has no room for (the SDK's own objects hold %s of it: PoolStats.Overhead): %w",
					kindNames[k], bytesize.Format(n), bytesize.Format(m.Bytes()), err)
			}
			// Closed (the pool is closing) or reaped: the charge no longer
			// matters, the object does.
		}
	}
	m.live[k].Add(1)
	m.bytes[k].Add(n)
	return nil
}

// undo takes back take's count of an object the driver did not make.
func (m *Meter) undo(k kind, n uint64) {
	if k == green {
		m.made.Add(-1)
	}
	m.live[k].Add(-1)
	m.give(k, n)
}

// gone counts an object of kind k destroyed; its n bytes go back to the
// device limit (none for a green context, whose memory the driver keeps).
// A handle the meter never counted (made before the pool, or twice
// destroyed) changes nothing.
func (m *Meter) gone(k kind, n uint64) {
	for {
		l := m.live[k].Load()
		if l <= 0 {
			return
		}
		if m.live[k].CompareAndSwap(l, l-1) {
			break
		}
	}
	if k != green {
		m.give(k, n)
	}
}

func (m *Meter) give(k kind, n uint64) {
	if n == 0 {
		return
	}
	m.bytes[k].Add(^(n - 1))
	if t := m.t.Load(); t != nil {
		t.ReleaseDevice(n)
	}
}

// Make is cuda.Maker's: it counts one object of kind o (a module of an
// n-byte image), charging the device limit where bound, or refuses it.
func (m *Meter) Make(o cuda.Object, n int) error { return m.take(kindOf(o), costOf(o, n)) }

// Made is cuda.Maker's: an object the driver did not make is taken back;
// a module's cost is kept by its handle, for its unload.
func (m *Meter) Made(o cuda.Object, h uintptr, n int, err error) {
	k, c := kindOf(o), costOf(o, n)
	if err != nil {
		m.undo(k, c)
		return
	}
	if k == module {
		m.mu.Lock()
		if m.mods == nil {
			m.mods = map[uintptr]uint64{}
		}
		m.mods[h] = c
		m.mu.Unlock()
	}
}

// Unmade is cuda.Maker's: the object is counted gone whatever the driver
// says of its destroy (the SDK drops a handle whose destroy failed, a lost
// device's, and the driver's memory goes with its context).
func (m *Meter) Unmade(o cuda.Object, h uintptr) {
	k, c := kindOf(o), costOf(o, 0)
	if k == module {
		m.mu.Lock()
		var ok bool
		c, ok = m.mods[h]
		delete(m.mods, h)
		m.mu.Unlock()
		if !ok {
			return // not made through the meter
		}
	}
	m.gone(k, c)
}

func kindOf(o cuda.Object) kind {
	switch o {
	case cuda.ObjGreenCtx:
		return green
	case cuda.ObjStream:
		return stream
	case cuda.ObjEvent:
		return event
	}
	return module
}

// costOf is what an object costs (internal/cuda's table).
func costOf(o cuda.Object, n int) uint64 {
	switch o {
	case cuda.ObjGreenCtx:
		return cuda.GreenCtxCost
	case cuda.ObjStream:
		return cuda.StreamCost
	case cuda.ObjEvent:
		return cuda.EventCost
	}
	return cuda.ModuleCost(n)
}

var _ cuda.Maker = (*Meter)(nil)
