// Package memwatch samples the device's own view of the process's memory
// (what NVML reports for the process) beside what the pool counts of it
// (its tenants' charges and its own objects': internal/overhead), and
// keeps the difference: memory nobody counted, such as the primary
// context, a library's own workspace or caching allocator. Past a bound it
// logs a warning; asked to, it charges the difference against the device
// limit (memtrack.Tracker.ChargeDevice), so that an allocation is refused
// before the device is full rather than a library failing inside a Do.
//
// It samples on a goroutine of its own at a low rate, not when the pool's
// figures are read: NVML's process list is a call into the kernel driver
// (hundreds of microseconds to milliseconds), and PoolStats is read by
// scrapes and by loops that poll it, which must stay cheap. A reading is
// one atomic load of the last sample.
package memwatch

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcsp-go/fcsp-go/internal/bytesize"
	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/nvml"
	"github.com/fcsp-go/fcsp-go/memtrack"
)

// Sample is one reading (fcsp's DeviceMemory has the same fields).
type Sample struct {
	At          time.Time // when; zero: none yet (Reason says why)
	Used        uint64    // the process's device memory as the device reports it
	Counted     uint64    // what the pool counted of it at that moment
	Unaccounted uint64    // Used less Counted (0 where Counted is more)
	Charged     uint64    // of Unaccounted, what counts against the device limit
	Reason      string    // why At is zero, or why the last reading failed
}

// Source reads the process's device memory.
type Source func() (uint64, error)

// Config is what a Watch needs.
type Config struct {
	Every time.Duration // between samples
	// Source reads the figure; or Open, on the sampling goroutine before
	// the first sample (NVML's init may take long: not on the caller's
	// path), returns it, with what to run when the sampling stops.
	Source  Source
	Open    func() (Source, func(), error)
	Counted func() uint64 // what the pool counts of the process's device memory
	// Warn: a warning is logged when Unaccounted passes it (0: never),
	// once until it falls back below.
	Warn uint64
	// Charge, if set, is charged Unaccounted at every sample.
	Charge *memtrack.Tracker
	Log    *slog.Logger // nil: slog.Default()
	// Done stops the sampling when closed (the pool's close).
	Done <-chan struct{}
	// Close, if set, runs when the sampling stops (the source's cleanup).
	Close func()
}

// Watch samples until its Done closes. A nil *Watch reads as never
// sampled.
type Watch struct {
	cfg     Config
	last    atomic.Pointer[Sample]
	charged atomic.Uint64
	// mu orders Sample's callers (the goroutine, a test); a leaf but for
	// what Source, Counted and the tracker's charge take under it.
	mu     sync.Mutex
	warned bool // under mu
}

// Start takes a first sample at once and then one every cfg.Every, on a
// goroutine of its own, until cfg.Done closes. Sample before the first is
// taken (or where Open failed) reads nothing.
func Start(cfg Config) *Watch {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	w := &Watch{cfg: cfg}
	w.last.Store(&Sample{Reason: "not sampled yet"})
	go w.run()
	return w
}

// Off is a Watch that never samples, saying why.
func Off(reason string) *Watch {
	w := &Watch{}
	w.last.Store(&Sample{Reason: reason})
	return w
}

func (w *Watch) run() {
	if w.cfg.Open != nil {
		src, closeSrc, err := w.cfg.Open()
		if err != nil {
			w.last.Store(&Sample{Reason: err.Error()})
			w.cfg.Log.Warn("fcsp pool: the device's view of the process's memory cannot be sampled", "why", err)
			return
		}
		w.mu.Lock()
		w.cfg.Source, w.cfg.Close = src, closeSrc
		w.mu.Unlock()
	}
	if w.cfg.Close != nil {
		defer w.cfg.Close()
	}
	t := time.NewTicker(w.cfg.Every)
	defer t.Stop()
	for {
		w.Sample()
		select {
		case <-t.C:
		case <-w.cfg.Done:
			return
		}
	}
}

// Read is the last sample.
func (w *Watch) Read() Sample {
	if w == nil {
		return Sample{Reason: "not sampled"}
	}
	return *w.last.Load()
}

// Charged is what the watch holds of the device limit now.
func (w *Watch) Charged() uint64 {
	if w == nil {
		return 0
	}
	return w.charged.Load()
}

// Sample takes a sample now (the sampling goroutine's step; a test's).
func (w *Watch) Sample() Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg.Source == nil {
		return w.Read() // not open (yet)
	}
	used, err := w.cfg.Source()
	if err != nil {
		s := w.Read()
		s.Reason = err.Error() // the last good figures stay, saying why they are old
		w.last.Store(&s)
		return s
	}
	counted := w.cfg.Counted()
	s := Sample{At: time.Now(), Used: used, Counted: counted, Unaccounted: used - min(used, counted)}
	s.Charged = w.charge(s.Unaccounted)
	w.last.Store(&s)
	w.warn(s)
	return s
}

// charge brings the watch's charge against the device limit to n.
func (w *Watch) charge(n uint64) uint64 {
	t := w.cfg.Charge
	if t == nil {
		return 0
	}
	held := w.charged.Load()
	switch {
	case n > held:
		if t.ChargeDevice(n-held) != nil {
			return held // closed or reaped: nothing more is charged
		}
	case n < held:
		t.ReleaseDevice(held - n)
	}
	w.charged.Store(n)
	return n
}

func (w *Watch) warn(s Sample) {
	if w.cfg.Warn == 0 {
		return
	}
	if s.Unaccounted <= w.cfg.Warn {
		w.warned = false
		return
	}
	if w.warned {
		return
	}
	w.warned = true
	w.cfg.Log.Warn("fcsp pool: device memory that nothing counted passed its bound: the primary context, a library's own workspace or caching allocator; "+
		"give libraries memory from a quota (Current.Workspace), or fold it into the limit (WithUnaccountedHeadroom)",
		"unaccounted", bytesize.Format(s.Unaccounted), "bound", bytesize.Format(w.cfg.Warn),
		"device_used", bytesize.Format(s.Used), "counted", bytesize.Format(s.Counted))
}

// SourceFor is where the process's device memory is read for a pool on
// drv's device uuid: the driver itself where it can say (the fake driver,
// whose figure stands for NVML's), else NVML, kept open until the returned
// close runs. A simulated device without that figure has none.
func SourceFor(drv cuda.Driver, uuid string, simulated bool) (src Source, close func(), err error) {
	for d := drv; d != nil; {
		if p, ok := d.(interface{ ProcessMemory() uint64 }); ok {
			return func() (uint64, error) { return p.ProcessMemory(), nil }, nil, nil
		}
		u, ok := d.(interface{ Unwrap() cuda.Driver })
		if !ok {
			break
		}
		d = u.Unwrap()
	}
	if simulated {
		return nil, nil, errors.New("simulated device")
	}
	lib, err := nvml.Load()
	if err != nil {
		return nil, nil, err
	}
	s, err := nvml.OpenSession(lib, uuid)
	if err != nil {
		return nil, nil, err
	}
	pid := os.Getpid()
	return func() (uint64, error) {
		n, err := s.ProcessUsed(pid)
		if err != nil {
			return 0, fmt.Errorf("nvml: %w", err)
		}
		return n, nil
	}, s.Close, nil
}
