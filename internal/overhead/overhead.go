// Package overhead counts the device memory a pool's own objects hold
// (green contexts, streams, events, modules) and charges it against the
// pool's device limit, so that a pool under a limit keeps what the device
// sees of the process within it, rather than the tenants' allocations
// alone (issue 54: a latency class of 16-48 SMs warmed with 16 Dos per
// size is 80 green contexts, 320 MiB at 4 MiB each, which no quota saw).
//
// The Meter is a cuda.Driver between the pool's guard and the driver
// (Wrap): every object the pool makes, whichever engine or mechanism makes
// it, passes it, so no call site counts. A creation is charged before the
// driver is asked and refused, changing nothing, where the limit has no
// room for it (a *memtrack.QuotaError, errs.ErrQuotaExceeded) or where it
// would pass the pool's bound on green contexts (errs.ErrGreenContextLimit).
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

	mu   sync.Mutex // guards mods; a leaf: nothing is taken or called under it
	mods map[cuda.Module]uint64
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

// Wrap returns d with every object it makes counted by m.
func (m *Meter) Wrap(d cuda.Driver) cuda.Driver { return &driver{Driver: d, m: m} }

// driver is the meter's place among the pool's drivers: the calls that
// make and destroy objects, the others passed through.
type driver struct {
	cuda.Driver
	m *Meter
}

// Unwrap is the driver beneath (smpart names a device by it).
func (d *driver) Unwrap() cuda.Driver { return d.Driver }

func (d *driver) GreenCtxCreate(desc cuda.ResourceDesc, dev cuda.Device, flags uint32) (cuda.GreenCtx, error) {
	if err := d.m.take(green, cuda.GreenCtxCost); err != nil {
		return 0, err
	}
	g, err := d.Driver.GreenCtxCreate(desc, dev, flags)
	if err != nil {
		d.m.undo(green, cuda.GreenCtxCost)
	}
	return g, err
}

func (d *driver) GreenCtxDestroy(g cuda.GreenCtx) error {
	d.m.gone(green, 0)
	return d.Driver.GreenCtxDestroy(g)
}

func (d *driver) StreamCreate(c cuda.Context, flags uint32) (cuda.Stream, error) {
	if err := d.m.take(stream, cuda.StreamCost); err != nil {
		return 0, err
	}
	s, err := d.Driver.StreamCreate(c, flags)
	if err != nil {
		d.m.undo(stream, cuda.StreamCost)
	}
	return s, err
}

func (d *driver) GreenCtxStreamCreate(g cuda.GreenCtx, flags uint32, priority int) (cuda.Stream, error) {
	if err := d.m.take(stream, cuda.StreamCost); err != nil {
		return 0, err
	}
	s, err := d.Driver.GreenCtxStreamCreate(g, flags, priority)
	if err != nil {
		d.m.undo(stream, cuda.StreamCost)
	}
	return s, err
}

// StreamDestroy counts the stream gone whatever the driver says: the SDK
// drops a handle whose destroy failed (a lost device's), and so does the
// driver's memory with its context.
func (d *driver) StreamDestroy(c cuda.Context, s cuda.Stream) error {
	d.m.gone(stream, cuda.StreamCost)
	return d.Driver.StreamDestroy(c, s)
}

func (d *driver) EventCreate(c cuda.Context, flags uint32) (cuda.Event, error) {
	if err := d.m.take(event, cuda.EventCost); err != nil {
		return 0, err
	}
	e, err := d.Driver.EventCreate(c, flags)
	if err != nil {
		d.m.undo(event, cuda.EventCost)
	}
	return e, err
}

func (d *driver) EventDestroy(c cuda.Context, e cuda.Event) error {
	d.m.gone(event, cuda.EventCost)
	return d.Driver.EventDestroy(c, e)
}

func (d *driver) ModuleLoadData(c cuda.Context, image []byte) (cuda.Module, error) {
	n := cuda.ModuleCost(len(image))
	if err := d.m.take(module, n); err != nil {
		return 0, err
	}
	h, err := d.Driver.ModuleLoadData(c, image)
	if err != nil {
		d.m.undo(module, n)
		return h, err
	}
	d.m.mu.Lock()
	if d.m.mods == nil {
		d.m.mods = map[cuda.Module]uint64{}
	}
	d.m.mods[h] = n
	d.m.mu.Unlock()
	return h, nil
}

func (d *driver) ModuleUnload(c cuda.Context, h cuda.Module) error {
	d.m.mu.Lock()
	n, ok := d.m.mods[h]
	delete(d.m.mods, h)
	d.m.mu.Unlock()
	if ok {
		d.m.gone(module, n)
	}
	return d.Driver.ModuleUnload(c, h)
}
